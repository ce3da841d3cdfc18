// Host tests of llmc/gpu_peak.h: the peak table behind the step line's MFU, the estimate for
// unknown GPUs (never negative, llm.c printed -100% for the H200), and the MFU formula.
#include <gtest/gtest.h>

#include "llmc/gpu_peak.h"
#include "llmc/model_file.h"

TEST(GpuPeak, KnownPartsFromDatasheets) {
    // names as nvidia-smi / cudaGetDeviceProperties report them
    EXPECT_DOUBLE_EQ(gpu_peak_bf16("NVIDIA H200", 9, 0, 132, 1980000).flops, 989.4e12);
    EXPECT_DOUBLE_EQ(gpu_peak_bf16("NVIDIA H100 80GB HBM3", 9, 0, 132, 1980000).flops, 989.4e12);
    EXPECT_DOUBLE_EQ(gpu_peak_bf16("NVIDIA H100 PCIe", 9, 0, 114, 1755000).flops, 756.0e12);
    EXPECT_DOUBLE_EQ(gpu_peak_bf16("NVIDIA A100-SXM4-80GB", 8, 0, 108, 1410000).flops, 312.0e12);
    EXPECT_DOUBLE_EQ(gpu_peak_bf16("NVIDIA GeForce RTX 4090", 8, 9, 128, 2520000).flops, 165.2e12);
    EXPECT_NE(gpu_peak_bf16("NVIDIA H200", 9, 0, 132, 0).source.find("datasheet"), std::string::npos);
}

TEST(GpuPeak, UnknownPartsAreEstimatedNotNegative) {
    // an unknown Hopper part: 4096 dense bf16 FLOPs per SM per clock (H100 SXM: 132 x 1.83 GHz x 4096 = 989 T)
    const GpuPeak hopper = gpu_peak_bf16("NVIDIA Future Hopper", 9, 0, 132, 1830000);
    EXPECT_NEAR(hopper.flops, 132 * 1.83e9 * 4096, 1e6);
    EXPECT_NE(hopper.source.find("estimated"), std::string::npos);
    EXPECT_GT(gpu_peak_bf16("NVIDIA Future Blackwell", 10, 0, 148, 1900000).flops, 0.0);
    EXPECT_GT(gpu_peak_bf16("NVIDIA RTX A4000", 8, 6, 48, 1560000).flops, 0.0);
    // pre-Ampere, or no clock: unknown, and MFU then prints 0
    const GpuPeak volta = gpu_peak_bf16("Tesla V100-SXM2-16GB", 7, 0, 80, 1530000);
    EXPECT_EQ(volta.flops, 0.0);
    EXPECT_NE(volta.source.find("unknown"), std::string::npos);
    EXPECT_EQ(gpu_peak_bf16("NVIDIA Future Hopper", 9, 0, 132, 0).flops, 0.0);
    EXPECT_EQ(mfu_percent(8e8, 5e5, 1, volta.flops), 0.0);
}

TEST(GpuPeak, MfuOfGpt2d12) {
    GPT2Config cfg;
    ASSERT_TRUE(gpt2_config_from_descriptor("d12", &cfg));
    const double fpt = gpt2_flops_per_token((double)gpt2_num_parameters(cfg), cfg.num_layers, cfg.channels, 1024);
    EXPECT_DOUBLE_EQ(fpt, 6.0 * 124475904 + 6.0 * 12 * 768 * 1024);  // docs/formats.md "Step line": 6N + 6LCT
    // 561,240 tok/s on one H200 (README) is 45.6% of 989.4 TFLOP/s; the same total rate on 8 GPUs is 1/8 of that
    EXPECT_NEAR(mfu_percent(fpt, 561240, 1, 989.4e12), 45.58, 0.01);
    EXPECT_NEAR(mfu_percent(fpt, 561240, 8, 989.4e12), 45.58 / 8, 0.01);
    EXPECT_EQ(mfu_percent(fpt, 561240, 0, 989.4e12), 0.0);
}
