/*
 * Model FLOPs utilisation and GPU monitoring.
 *
 * gpu_peak_bf16_flops(props): the dense bf16 tensor-core peak of the current GPU. Known parts come
 * from the vendors' datasheets (H100 SXM and H200: 989 TFLOP/s; llm.c's table lacks the H200 and
 * prints -100%). Unknown parts get an estimate from SM count x boost clock x dense bf16 FLOPs per
 * SM per clock of the architecture, marked "(estimated)"; only pre-Ampere GPUs get 0 (MFU 0.0%).
 *
 * GpuMonitor (-lg): utilisation, SM clock, power, temperature, memory through NVML, loaded with
 * dlopen at run time so the trainer neither links against nor requires the driver's libnvidia-ml.
 */
#pragma once

#include <dlfcn.h>
#include <cuda_runtime.h>
#include <cstdio>
#include <cstring>
#include <string>

struct GpuPeak {
    double flops = 0.0;   // dense bf16 FLOP/s; 0 = unknown
    std::string source;   // shown in the start-up table
};

inline GpuPeak gpu_peak_bf16_flops(const cudaDeviceProp& props) {
    struct Known { const char* name_part; const char* not_part; double tflops; };
    // Order matters: the first match wins (PCIe variants before the plain name).
    static const Known known[] = {
        {"H200", nullptr, 989.4},      {"GH200", nullptr, 989.4},      {"H100 PCIe", nullptr, 756.0},
        {"H100", nullptr, 989.4},      {"H800", nullptr, 989.4},       {"B200", nullptr, 2250.0},
        {"A100", nullptr, 312.0},      {"A800", nullptr, 312.0},       {"L40S", nullptr, 362.05},
        {"RTX 4090", nullptr, 165.2},  {"RTX 3090", nullptr, 71.0},    {"A6000", nullptr, 154.8},
    };
    GpuPeak p;
    for (const Known& k : known) {
        if (strstr(props.name, k.name_part) != nullptr) {
            p.flops = k.tflops * 1e12;
            char buf[96];
            snprintf(buf, sizeof(buf), "%.1f (%s datasheet)", k.tflops, k.name_part);
            p.source = buf;
            return p;
        }
    }
    // dense bf16 FLOPs per SM per clock (with fp32 accumulation) by architecture
    double per_sm_clock = 0.0;
    if (props.major == 8 && props.minor == 0) per_sm_clock = 2048;
    else if (props.major == 8) per_sm_clock = 512;
    else if (props.major == 9) per_sm_clock = 4096;
    else if (props.major >= 10) per_sm_clock = 8192;
    int clock_khz = 0;
    int dev = 0;
    cudaGetDevice(&dev);
    if (cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev) != cudaSuccess) clock_khz = 0;
    p.flops = per_sm_clock * props.multiProcessorCount * clock_khz * 1e3;
    char buf[96];
    if (p.flops > 0) snprintf(buf, sizeof(buf), "%.1f (estimated from SMs x clock)", p.flops / 1e12);
    else snprintf(buf, sizeof(buf), "unknown (MFU printed as 0)");
    p.source = buf;
    return p;
}

// ----------------------------------------------------------------------------
// NVML through dlopen (ABI of the few calls used, from NVML's public documentation)

struct GpuMonitor {
    void* lib = nullptr;
    void* device = nullptr;  // nvmlDevice_t
    typedef int (*init_fn)();
    typedef int (*handle_fn)(const char*, void**);
    typedef int (*util_fn)(void*, unsigned int*);           // nvmlUtilization_t = {gpu, memory}
    typedef int (*uint_query_fn)(void*, int, unsigned int*);  // clock / temperature
    typedef int (*power_fn)(void*, unsigned int*);
    util_fn get_utilization = nullptr;
    uint_query_fn get_clock = nullptr, get_temperature = nullptr;
    power_fn get_power = nullptr;
    bool ok = false;
};

inline void gpu_monitor_init(GpuMonitor* m) {
    m->lib = dlopen("libnvidia-ml.so.1", RTLD_NOW);
    if (!m->lib) {
        fprintf(stderr, "warning: -lg: cannot load libnvidia-ml.so.1 (%s); GPU utilisation will not be shown\n", dlerror());
        return;
    }
    auto init = (GpuMonitor::init_fn)dlsym(m->lib, "nvmlInit_v2");
    auto by_bus = (GpuMonitor::handle_fn)dlsym(m->lib, "nvmlDeviceGetHandleByPciBusId_v2");
    m->get_utilization = (GpuMonitor::util_fn)dlsym(m->lib, "nvmlDeviceGetUtilizationRates");
    m->get_clock = (GpuMonitor::uint_query_fn)dlsym(m->lib, "nvmlDeviceGetClockInfo");
    m->get_temperature = (GpuMonitor::uint_query_fn)dlsym(m->lib, "nvmlDeviceGetTemperature");
    m->get_power = (GpuMonitor::power_fn)dlsym(m->lib, "nvmlDeviceGetPowerUsage");
    char bus_id[32] = {0};
    int dev = 0;
    cudaGetDevice(&dev);
    if (!init || !by_bus || !m->get_utilization || !m->get_clock || !m->get_temperature || !m->get_power ||
        init() != 0 || cudaDeviceGetPCIBusId(bus_id, sizeof(bus_id), dev) != cudaSuccess || by_bus(bus_id, &m->device) != 0) {
        fprintf(stderr, "warning: -lg: NVML did not initialise; GPU utilisation will not be shown\n");
        return;
    }
    m->ok = true;
}

inline void gpu_monitor_print(GpuMonitor* m) {
    if (!m->ok) return;
    unsigned int util[2] = {0, 0}, sm_clock = 0, temp = 0, power_mw = 0;
    m->get_utilization(m->device, util);
    m->get_clock(m->device, 1 /* NVML_CLOCK_SM */, &sm_clock);
    m->get_temperature(m->device, 0 /* NVML_TEMPERATURE_GPU */, &temp);
    m->get_power(m->device, &power_mw);
    printf("gpu: util %u%% | mem-bw util %u%% | SM clock %u MHz | %.0f W | %u C\n", util[0], util[1], sm_clock,
           power_mw / 1000.0, temp);
}
