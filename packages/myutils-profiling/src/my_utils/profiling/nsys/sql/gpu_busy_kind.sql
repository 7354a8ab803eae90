-- name: gpu_busy_kind
-- title: GPU busy time per device and kind of work
-- description: One row per (device, kind): the time covered by work of that kind (a union: concurrent work counts
-- description: once), as ms and as % of the device's busy time (the union of all its work, as gpu_busy_device).
-- description: Kinds are those of the kernels (computation, communication, memory, other); copies and sets are
-- description: memory. The kinds' times may add up to more than the busy time where kinds ran at once.
-- param: device int null Only this device
WITH src AS (
  SELECT device, kind AS grp, start, end FROM nsys_gpu_op WHERE :device IS NULL OR device = :device
  UNION ALL
  SELECT device, '*', start, end FROM nsys_gpu_op WHERE :device IS NULL OR device = :device
), ordered AS (
  SELECT device, grp, start, end,
         MAX(end) OVER (PARTITION BY device, grp ORDER BY start, end
                        ROWS BETWEEN UNBOUNDED PRECEDING AND 1 PRECEDING) AS reach
  FROM src
), islands AS (
  SELECT device, grp, start, end,
         SUM(CASE WHEN reach IS NULL OR start > reach THEN 1 ELSE 0 END)
           OVER (PARTITION BY device, grp ORDER BY start, end ROWS UNBOUNDED PRECEDING) AS island
  FROM ordered
), cover AS (
  SELECT device, grp, SUM(e - s) AS ns, SUM(ops) AS ops
  FROM (SELECT device, grp, island, MIN(start) AS s, MAX(end) AS e, COUNT(*) AS ops
        FROM islands GROUP BY device, grp, island)
  GROUP BY device, grp
)
SELECT c.device,
       c.grp AS kind,
       c.ops,
       c.ns AS busy_ns,
       100.0 * c.ns / NULLIF(a.ns, 0) AS share_of_busy_pct
FROM cover c JOIN cover a ON a.device = c.device AND a.grp = '*'
WHERE c.grp <> '*'
ORDER BY c.device, c.ns DESC, c.grp
