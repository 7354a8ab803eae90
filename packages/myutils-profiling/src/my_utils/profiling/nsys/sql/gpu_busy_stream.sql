-- name: gpu_busy_stream
-- title: GPU busy and idle time per stream
-- description: One row per (device, stream): the stream's span (first start to last end of its kernels, copies and
-- description: sets), its busy time (union of its intervals) and idle time (span - busy). Rows of one device are not
-- description: to be added up: two streams idle at the same moment would count that moment twice.
-- param: device int null Only this device
WITH ordered AS (
  SELECT device, stream, start, end,
         MAX(end) OVER (PARTITION BY device, stream ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM nsys_gpu_op
  WHERE :device IS NULL OR device = :device
), islands AS (
  SELECT device, stream, start, end,
         SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY device, stream ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
), merged AS (
  SELECT device, stream, island, MIN(start) AS s, MAX(end) AS e, COUNT(*) AS ops
  FROM islands GROUP BY device, stream, island
)
SELECT device,
       stream,
       MIN(s) AS span_start,
       MAX(e) AS span_end,
       MAX(e) - MIN(s) AS span_ns,
       SUM(e - s) AS busy_ns,
       MAX(e) - MIN(s) - SUM(e - s) AS idle_ns,
       100.0 * SUM(e - s) / NULLIF(MAX(e) - MIN(s), 0) AS busy_pct,
       SUM(ops) AS ops
FROM merged
GROUP BY device, stream
ORDER BY device, busy_ns DESC, stream
