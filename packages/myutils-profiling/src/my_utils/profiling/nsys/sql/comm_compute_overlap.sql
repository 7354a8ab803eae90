-- name: comm_compute_overlap
-- title: Compute-communication overlap per device
-- description: One row per device with kernels. communication_ns and computation_ns are the time covered by
-- description: communication (NCCL) and computation kernels (unions: concurrent kernels count once); overlap_ns is
-- description: the time covered by both; exposed_communication_ns the communication time no computation hides;
-- description: overlap_pct = overlap_ns / communication_ns (null without communication), as in Holistic Trace
-- description: Analysis' comm-comp overlap.
WITH src AS (
  SELECT device, kind AS grp, start, end FROM nsys_kernel WHERE kind IN ('communication', 'computation')
  UNION ALL
  SELECT device, 'both', start, end FROM nsys_kernel WHERE kind IN ('communication', 'computation')
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
  SELECT device, grp, SUM(e - s) AS ns
  FROM (SELECT device, grp, island, MIN(start) AS s, MAX(end) AS e FROM islands GROUP BY device, grp, island)
  GROUP BY device, grp
), pivot AS (
  SELECT device,
         SUM(CASE WHEN grp = 'communication' THEN ns ELSE 0 END) AS comm,
         SUM(CASE WHEN grp = 'computation' THEN ns ELSE 0 END) AS comp,
         SUM(CASE WHEN grp = 'both' THEN ns ELSE 0 END) AS any_
  FROM cover GROUP BY device
)
SELECT device,
       comm AS communication_ns,
       comp AS computation_ns,
       comm + comp - any_ AS overlap_ns,
       any_ - comp AS exposed_communication_ns,
       100.0 * (comm + comp - any_) / NULLIF(comm, 0) AS overlap_pct
FROM pivot
ORDER BY device
