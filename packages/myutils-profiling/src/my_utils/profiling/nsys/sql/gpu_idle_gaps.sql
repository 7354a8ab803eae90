-- name: gpu_idle_gaps
-- title: Every idle gap of each device, with its cause
-- description: One row per idle gap of a device (the gaps of gpu_busy_device, in start order): gap_start is
-- description: the latest end so far, gap_end the next start, pid the process of the work that ends the gap;
-- description: category as in gpu_idle_causes (host_wait, kernel_wait, other). Streams as many rows as the
-- description: devices have gaps: add a limit, or read gpu_idle_causes for the totals.
-- param: kernel_wait_ns int 30000 A gap shorter than this (ns) between activities is kernel wait
-- param: device int null Only this device
-- param: min_ns int 0 Only gaps at least this long (ns)
WITH ordered AS (
  SELECT device, pid, corr, start,
         MAX(end) OVER (PARTITION BY device ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM nsys_gpu_op
  WHERE :device IS NULL OR device = :device
), gaps AS (
  SELECT device, pid, corr, reach AS gap_start, start AS gap_end
  FROM ordered
  WHERE reach IS NOT NULL AND start > reach AND start - reach >= :min_ns
), launch AS (
  SELECT r.pid, r.corr, MIN(r.start) AS start
  FROM nsys_runtime r JOIN (SELECT DISTINCT pid, corr FROM gaps WHERE corr IS NOT NULL) g
    ON g.pid = r.pid AND g.corr = r.corr
  GROUP BY r.pid, r.corr
)
SELECT g.device, g.pid, g.gap_start, g.gap_end, g.gap_end - g.gap_start AS ns,
       CASE WHEN l.start > g.gap_start THEN 'host_wait'
            WHEN g.gap_end - g.gap_start < :kernel_wait_ns THEN 'kernel_wait'
            ELSE 'other' END AS category
FROM gaps g LEFT JOIN launch l ON l.pid = g.pid AND l.corr = g.corr
ORDER BY g.device, g.gap_start
