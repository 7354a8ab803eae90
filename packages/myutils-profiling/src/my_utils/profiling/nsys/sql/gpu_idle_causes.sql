-- name: gpu_idle_causes
-- title: Why each device sat idle: host wait, kernel wait, other
-- description: One row per (device, category). The device's idle gaps are those of gpu_busy_device (every kernel,
-- description: copy and set of the device in start order; a gap runs from the latest end so far to the next start,
-- description: so the gaps add up to its idle_ns). A gap is host_wait when the CUDA call that launched the activity
-- description: ending it started after the gap began (the CPU was late), kernel_wait when it is shorter than
-- description: kernel_wait_ns (launch overhead between back-to-back work), and other otherwise (syncs, waits on
-- description: other streams or events): Holistic Trace Analysis' idle-time categories, device-level.
-- description: share_pct is of the device's idle time.
-- param: kernel_wait_ns int 30000 A gap shorter than this (ns) between activities is kernel wait
-- param: device int null Only this device
WITH ordered AS (
  SELECT device, pid, corr, start,
         MAX(end) OVER (PARTITION BY device ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM nsys_gpu_op
  WHERE :device IS NULL OR device = :device
), gaps AS (
  SELECT device, pid, corr, reach AS gap_start, start - reach AS ns
  FROM ordered
  WHERE reach IS NOT NULL AND start > reach
), launch AS (
  SELECT r.pid, r.corr, MIN(r.start) AS start
  FROM nsys_runtime r JOIN (SELECT DISTINCT pid, corr FROM gaps WHERE corr IS NOT NULL) g
    ON g.pid = r.pid AND g.corr = r.corr
  GROUP BY r.pid, r.corr
), classified AS (
  SELECT g.device, g.ns,
         CASE WHEN l.start > g.gap_start THEN 'host_wait'
              WHEN g.ns < :kernel_wait_ns THEN 'kernel_wait'
              ELSE 'other' END AS category
  FROM gaps g LEFT JOIN launch l ON l.pid = g.pid AND l.corr = g.corr
)
SELECT device,
       category,
       COUNT(*) AS gaps,
       SUM(ns) AS idle_ns,
       100.0 * SUM(ns) / SUM(SUM(ns)) OVER (PARTITION BY device) AS share_pct
FROM classified
GROUP BY device, category
ORDER BY device, category
