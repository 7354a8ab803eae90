-- name: gpu_devices
-- title: The GPUs the export describes
-- description: One row per CUDA device in the export's GPU table (empty when the export dropped it), with the
-- description: kernels that ran on it. Figures are as nsys reports them (bytes/s, Hz).
SELECT g.device,
       g.name,
       g.sm_count,
       g.memory_bandwidth_bps,
       g.clock_hz,
       (SELECT COUNT(*) FROM nsys_kernel k WHERE k.device = g.device) AS kernels
FROM nsys_gpu g
ORDER BY g.device
