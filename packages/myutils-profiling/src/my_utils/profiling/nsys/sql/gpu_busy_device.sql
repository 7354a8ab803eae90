-- name: gpu_busy_device
-- title: GPU busy and idle time per device
-- description: One row per device. span_ns runs from the first start to the last end of any kernel, copy or set
-- description: on the device; busy_ns is the union of those intervals (work on several streams at once counts once);
-- description: idle_ns = span_ns - busy_ns. Idle is never summed over streams. gaps counts the idle gaps.
-- param: device int null Only this device
WITH ordered AS (
  SELECT device, start, end,
         MAX(end) OVER (PARTITION BY device ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM nsys_gpu_op
  WHERE :device IS NULL OR device = :device
), islands AS (
  SELECT device, start, end,
         SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY device ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
), merged AS (
  SELECT device, island, MIN(start) AS s, MAX(end) AS e, COUNT(*) AS ops
  FROM islands GROUP BY device, island
)
SELECT device,
       MIN(s) AS span_start,
       MAX(e) AS span_end,
       MAX(e) - MIN(s) AS span_ns,
       SUM(e - s) AS busy_ns,
       MAX(e) - MIN(s) - SUM(e - s) AS idle_ns,
       100.0 * SUM(e - s) / NULLIF(MAX(e) - MIN(s), 0) AS busy_pct,
       SUM(ops) AS ops,
       COUNT(*) - 1 AS gaps
FROM merged
GROUP BY device
ORDER BY device
