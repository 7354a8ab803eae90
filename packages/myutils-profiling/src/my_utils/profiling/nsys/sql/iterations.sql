-- name: iterations
-- title: Per-iteration CPU time, GPU window, busy, idle and overlap from NVTX ranges
-- description: An iteration is one occurrence of the NVTX range named by `range` (a GLOB pattern), numbered per
-- description: process in start order. Its GPU work is every kernel, copy and set launched from inside it (the
-- description: launching CUDA call starts within the range, matched by correlation id, in the same process).
-- description: One row per (process, iteration, device): cpu_ns is the range's own duration; the GPU window runs
-- description: from the first start to the last end of its work; busy_ns is the union of that work, idle_ns =
-- description: window - busy; communication/computation/overlap as in comm_compute_overlap. An iteration that
-- description: launched nothing has one row with a null device.
-- param: range text required NVTX range name (GLOB: * and ? are wildcards) that marks one iteration
WITH it AS (
  SELECT pid, start, end, name, ROW_NUMBER() OVER (PARTITION BY pid ORDER BY start, end) AS idx
  FROM nsys_nvtx
  WHERE name GLOB :range
), ev AS (
  SELECT pid, start AS t, 0 AS is_call, idx, end AS it_end, NULL AS corr FROM it
  UNION ALL
  SELECT pid, start, 1, NULL, NULL, corr FROM nsys_runtime
  WHERE corr IS NOT NULL AND pid IN (SELECT pid FROM it)
), tagged AS (
  SELECT pid, t, is_call, corr,
         MAX(idx) OVER w AS idx,
         MAX(it_end) OVER w AS it_end
  FROM ev
  WINDOW w AS (PARTITION BY pid ORDER BY t, is_call ROWS UNBOUNDED PRECEDING)
), calls AS (
  SELECT pid, corr, idx FROM tagged WHERE is_call = 1 AND idx IS NOT NULL AND t < it_end
), ops AS (
  SELECT c.pid, c.idx, o.device, o.kind, o.start, o.end
  FROM nsys_gpu_op o JOIN calls c ON c.pid = o.pid AND c.corr = o.corr
), src AS (
  SELECT pid, idx, device, 'all' AS grp, start, end FROM ops
  UNION ALL
  SELECT pid, idx, device, kind, start, end FROM ops WHERE kind IN ('communication', 'computation')
  UNION ALL
  SELECT pid, idx, device, 'both', start, end FROM ops WHERE kind IN ('communication', 'computation')
), ordered AS (
  SELECT pid, idx, device, grp, start, end,
         MAX(end) OVER (PARTITION BY pid, idx, device, grp ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM src
), islands AS (
  SELECT pid, idx, device, grp, start, end,
         SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY pid, idx, device, grp ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
), merged AS (
  SELECT pid, idx, device, grp, island, MIN(start) AS s, MAX(end) AS e, COUNT(*) AS ops
  FROM islands GROUP BY pid, idx, device, grp, island
), cover AS (
  SELECT pid, idx, device,
         MIN(CASE WHEN grp = 'all' THEN s END) AS gpu_start,
         MAX(CASE WHEN grp = 'all' THEN e END) AS gpu_end,
         SUM(CASE WHEN grp = 'all' THEN e - s ELSE 0 END) AS busy,
         SUM(CASE WHEN grp = 'all' THEN ops ELSE 0 END) AS ops,
         SUM(CASE WHEN grp = 'communication' THEN e - s ELSE 0 END) AS comm,
         SUM(CASE WHEN grp = 'computation' THEN e - s ELSE 0 END) AS comp,
         SUM(CASE WHEN grp = 'both' THEN e - s ELSE 0 END) AS any_
  FROM merged GROUP BY pid, idx, device
)
SELECT it.pid,
       it.idx AS iteration,
       it.name,
       it.start,
       it.end,
       it.end - it.start AS cpu_ns,
       c.device,
       c.ops,
       c.gpu_start,
       c.gpu_end,
       c.gpu_end - c.gpu_start AS gpu_window_ns,
       c.busy AS busy_ns,
       c.gpu_end - c.gpu_start - c.busy AS idle_ns,
       c.comm AS communication_ns,
       c.comp AS computation_ns,
       c.comm + c.comp - c.any_ AS overlap_ns
FROM it LEFT JOIN cover c ON c.pid IS it.pid AND c.idx = it.idx
ORDER BY it.pid, it.idx, c.device
