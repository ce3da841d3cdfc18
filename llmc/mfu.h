/*
 * Model FLOPs utilisation and GPU monitoring on the device.
 *
 * gpu_peak_bf16_flops(props): the dense bf16 peak of the current GPU (the table and the estimate for
 * unknown GPUs are in llmc/gpu_peak.h, which has no CUDA dependency and is tested on the host).
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

#include "llmc/gpu_peak.h"

// The peak of the current GPU: its name, architecture, SM count and clock, through llmc/gpu_peak.h.
inline GpuPeak gpu_peak_bf16_flops(const cudaDeviceProp& props) {
    int clock_khz = 0, dev = 0;
    if (cudaGetDevice(&dev) != cudaSuccess || cudaDeviceGetAttribute(&clock_khz, cudaDevAttrClockRate, dev) != cudaSuccess) {
        clock_khz = 0;
    }
    return gpu_peak_bf16(props.name, props.major, props.minor, props.multiProcessorCount, clock_khz);
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
