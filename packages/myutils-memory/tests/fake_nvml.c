/* A fake libnvidia-ml.so.1 for the monitor's tests: one or more fake GPUs with known readings.
 * Built by the tests with gcc. -DNO_ENERGY leaves out nvmlDeviceGetTotalEnergyConsumption, as
 * an old driver does; -DNO_POWER leaves out power too. FAKE_NVML_GPUS sets the GPU count (2). */
#include <stdio.h>
#include <stdlib.h>
typedef int ret_t;
typedef void *dev_t_;
typedef struct { unsigned long long total, free, used; } mem_t;
typedef struct { unsigned int gpu, memory; } util_t;
#define EXPORT __attribute__((visibility("default")))
static int refs;
static unsigned long long energy_mj = 5000000ULL; /* grows by 1 J per reading */
static unsigned gpus(void) { const char *e = getenv("FAKE_NVML_GPUS"); return e ? (unsigned)atoi(e) : 2; }
EXPORT ret_t nvmlInit_v2(void) { refs++; return 0; }
EXPORT ret_t nvmlInitWithFlags(unsigned flags) { (void)flags; refs++; return 0; }
EXPORT ret_t nvmlShutdown(void) { if (refs == 0) return 1; refs--; return 0; }
EXPORT const char *nvmlErrorString(ret_t r) {
    return r == 1 ? "Uninitialized" : r == 2 ? "Invalid Argument" : "Unknown Error";
}
EXPORT ret_t nvmlDeviceGetCount_v2(unsigned *n) { if (!refs) return 1; *n = gpus(); return 0; }
EXPORT ret_t nvmlDeviceGetHandleByIndex_v2(unsigned i, dev_t_ *h) {
    if (!refs) return 1;
    if (i >= gpus()) return 2;
    *h = (dev_t_)(size_t)(i + 1);
    return 0;
}
EXPORT ret_t nvmlDeviceGetName(dev_t_ h, char *name, unsigned n) { snprintf(name, n, "Fake GPU %zu", (size_t)h - 1); return 0; }
EXPORT ret_t nvmlDeviceGetMemoryInfo(dev_t_ h, mem_t *m) {
    (void)h; m->total = 80ULL << 30; m->used = 3ULL << 30; m->free = m->total - m->used; return 0;
}
EXPORT ret_t nvmlDeviceGetUtilizationRates(dev_t_ h, util_t *u) { u->gpu = 40 + (unsigned)(size_t)h; u->memory = 25; return 0; }
#ifndef NO_POWER
EXPORT ret_t nvmlDeviceGetPowerUsage(dev_t_ h, unsigned *mw) { (void)h; *mw = 250000; return 0; }
#endif
#ifndef NO_ENERGY
EXPORT ret_t nvmlDeviceGetTotalEnergyConsumption(dev_t_ h, unsigned long long *mj) {
    (void)h; *mj = energy_mj; energy_mj += 1000; return 0;
}
#endif
