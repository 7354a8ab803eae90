-- name: nvtx_summary
-- title: NVTX ranges by name
-- description: One row per (domain, range name): occurrences, total/mean/min/max duration on the CPU threads that
-- description: pushed them. Nested ranges each count their own time. With fold (the default), the per-call
-- description: suffixes PyTorch's NVTX emission appends (", seq = 12", ", op_id = 345", ", sizes = [...]",
-- description: ", input_op_ids = ...") are cut, so one operator is one row (as nsys diff compares them).
-- param: limit int 20 How many rows (the largest total first)
-- param: domain text null Only this NVTX domain ('' is the default domain)
-- param: name text null Only ranges whose name matches this GLOB pattern (before folding)
-- param: fold int 1 1: cut PyTorch's per-call suffixes from the names; 0: keep every name as recorded
WITH named AS (
  SELECT domain, dur, name,
         CASE WHEN :fold THEN MIN(
           CASE WHEN instr(name, ', seq = ') > 0 THEN instr(name, ', seq = ') ELSE 2147483647 END,
           CASE WHEN instr(name, ', op_id = ') > 0 THEN instr(name, ', op_id = ') ELSE 2147483647 END,
           CASE WHEN instr(name, ', sizes = ') > 0 THEN instr(name, ', sizes = ') ELSE 2147483647 END,
           CASE WHEN instr(name, ', input_op_ids = ') > 0 THEN instr(name, ', input_op_ids = ') ELSE 2147483647 END)
         ELSE 2147483647 END AS cut
  FROM nsys_nvtx
  WHERE (:domain IS NULL OR domain = :domain) AND (:name IS NULL OR name GLOB :name)
)
SELECT domain,
       CASE WHEN cut < 2147483647 THEN substr(name, 1, cut - 1) ELSE name END AS name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MIN(dur) AS min_ns,
       MAX(dur) AS max_ns
FROM named
GROUP BY domain, 2
ORDER BY total_ns DESC, name
LIMIT :limit
