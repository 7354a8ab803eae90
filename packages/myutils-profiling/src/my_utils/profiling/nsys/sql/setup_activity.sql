-- name: setup_activity
-- title: One-off work in the capture: communicator init, context creation, allocation, loading, JIT
-- description: One row per NVTX range or CUDA call that is setup rather than steady state, with its kind:
-- description: "communicator init" (NCCL's ncclCommInit*/ncclCommSplit ranges), "communicator teardown"
-- description: (ncclCommDestroy/Finalize/Abort), "JIT compilation" (NVTX ranges naming NVRTC or nvFuser's
-- description: compileFusion; nvrtc* and cuLink* calls), "context creation" (the first allocating or
-- description: device-selecting CUDA call of a process, when no GPU work precedes it: the call that creates the
-- description: context), "host allocation" (cudaHostAlloc, cudaMallocHost, cudaHostRegister and their frees),
-- description: "module loading" (cuModuleLoad*, cuLibraryLoad* and unloads), "device allocation before the
-- description: first kernel" (cudaMalloc/cudaFree and driver equivalents before the process's first kernel).
-- description: name is the call without nsys's _v<N> suffix, or the range's text.
-- param: pid int null Only this process
WITH api AS (
  SELECT pid, start, end,
         CASE WHEN instr(name, '_v') > 0 AND substr(name, instr(name, '_v') + 2, 1) GLOB '[0-9]'
              THEN substr(name, 1, instr(name, '_v') - 1) ELSE name END AS base
  FROM nsys_runtime
  WHERE :pid IS NULL OR pid = :pid
), first_op AS (
  SELECT pid, MIN(start) AS t FROM nsys_gpu_op GROUP BY pid
), first_kernel AS (
  SELECT pid, MIN(start) AS t FROM nsys_kernel GROUP BY pid
), creating AS (
  SELECT a.pid, MIN(a.start) AS t FROM api a
  WHERE a.base IN ('cudaMalloc', 'cudaFree', 'cudaSetDevice', 'cudaMallocManaged', 'cudaMallocHost',
                   'cudaHostAlloc', 'cudaStreamCreate', 'cudaStreamCreateWithFlags', 'cudaDeviceSynchronize',
                   'cudaMemGetInfo', 'cuCtxCreate', 'cuDevicePrimaryCtxRetain')
  GROUP BY a.pid
), calls AS (
  SELECT a.pid, a.start, a.end, a.base AS name,
    CASE
      WHEN a.base GLOB 'cuCtxCreate*' OR a.base = 'cuDevicePrimaryCtxRetain'
           OR (a.start = c.t AND (o.t IS NULL OR a.start < o.t)) THEN 'context creation'
      WHEN a.base IN ('cudaHostAlloc', 'cudaMallocHost', 'cudaHostRegister', 'cudaFreeHost', 'cudaHostUnregister',
                      'cuMemHostAlloc', 'cuMemAllocHost', 'cuMemHostRegister', 'cuMemFreeHost',
                      'cuMemHostUnregister') THEN 'host allocation'
      WHEN a.base GLOB 'cuModuleLoad*' OR a.base GLOB 'cuLibraryLoad*' OR a.base GLOB 'cudaLibraryLoad*'
           OR a.base IN ('cuModuleUnload', 'cuLibraryUnload', 'cudaLibraryUnload') THEN 'module loading'
      WHEN a.base GLOB 'nvrtc*' OR a.base GLOB 'cuLink*' THEN 'JIT compilation'
      WHEN a.base IN ('cudaMalloc', 'cudaFree', 'cudaMallocPitch', 'cudaMalloc3D', 'cuMemAlloc', 'cuMemFree',
                      'cuMemAllocPitch') AND (k.t IS NULL OR a.start < k.t)
        THEN 'device allocation before the first kernel'
    END AS kind
  FROM api a LEFT JOIN creating c ON c.pid IS a.pid LEFT JOIN first_op o ON o.pid IS a.pid
       LEFT JOIN first_kernel k ON k.pid IS a.pid
), ranges AS (
  SELECT pid, start, end, name,
    CASE
      WHEN name GLOB 'ncclCommInit*' OR name GLOB 'ncclCommSplit*' THEN 'communicator init'
      WHEN name GLOB 'ncclCommDestroy*' OR name GLOB 'ncclCommFinalize*' OR name GLOB 'ncclCommAbort*'
        THEN 'communicator teardown'
      WHEN name LIKE '%nvrtc%' OR name LIKE '%compileFusion%' OR name LIKE '%compile_fusion%' THEN 'JIT compilation'
    END AS kind
  FROM nsys_nvtx
  WHERE :pid IS NULL OR pid = :pid
)
SELECT pid, kind, name, start, end FROM calls WHERE kind IS NOT NULL
UNION ALL
SELECT pid, kind, name, start, end FROM ranges WHERE kind IS NOT NULL
ORDER BY pid, start, end
