-- name: kernel_kinds
-- title: Kernel time per device and kind
-- description: One row per (device, kind): launches, summed kernel time (kernels on several streams at once
-- description: each count) and its share of the device's summed kernel time.
SELECT device,
       kind,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       100.0 * SUM(dur) / SUM(SUM(dur)) OVER (PARTITION BY device) AS share_pct
FROM nsys_kernel
GROUP BY device, kind
ORDER BY device, total_ns DESC
