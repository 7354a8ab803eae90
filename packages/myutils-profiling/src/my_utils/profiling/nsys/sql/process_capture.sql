-- name: process_capture
-- title: Each process's capture span and how often its kernels repeat
-- description: One row per process: capture_start/capture_end run from its first to its last CUDA call, NVTX
-- description: range, OS runtime call or GPU activity (capture_ns between them); gpu_start/gpu_end bound its
-- description: kernels, copies and sets. kernels counts its kernel launches and kernel_names their distinct
-- description: names; repeated_names counts the names other than element-wise and memory kernels launched at
-- description: least twice (none: each such kernel ran once, a one-shot capture with no steady state).
WITH act AS (
  SELECT pid, start, end FROM nsys_runtime
  UNION ALL SELECT pid, start, end FROM nsys_nvtx
  UNION ALL SELECT pid, start, end FROM nsys_osrt
  UNION ALL SELECT pid, start, end FROM nsys_gpu_op
), span AS (
  SELECT pid, MIN(start) AS capture_start, MAX(end) AS capture_end FROM act WHERE pid IS NOT NULL GROUP BY pid
), gpu AS (
  SELECT pid, MIN(start) AS gpu_start, MAX(end) AS gpu_end FROM nsys_gpu_op GROUP BY pid
), names AS (
  SELECT pid, name_id, kind, MIN(name) AS name, COUNT(*) AS n FROM nsys_kernel GROUP BY pid, name_id
), k AS (
  SELECT pid, SUM(n) AS kernels, COUNT(*) AS kernel_names,
         SUM(CASE WHEN n >= 2 AND kind != 'memory' AND name NOT LIKE '%elementwise%' THEN 1 ELSE 0 END)
           AS repeated_names
  FROM names GROUP BY pid
)
SELECT s.pid, s.capture_start, s.capture_end, s.capture_end - s.capture_start AS capture_ns,
       g.gpu_start, g.gpu_end, COALESCE(k.kernels, 0) AS kernels, COALESCE(k.kernel_names, 0) AS kernel_names,
       COALESCE(k.repeated_names, 0) AS repeated_names
FROM span s LEFT JOIN gpu g ON g.pid IS s.pid LEFT JOIN k ON k.pid IS s.pid
ORDER BY s.pid
