-- name: nccl_kernels
-- title: NCCL kernels per device, stream and collective
-- description: One row per (device, stream, collective, kernel name) of communication kernels: launches and
-- description: total/mean/max duration. collective is read from the kernel name (AllReduce, SendRecv...).
SELECT device,
       stream,
       collective,
       short_name,
       COUNT(*) AS count,
       SUM(dur) AS total_ns,
       AVG(dur) AS mean_ns,
       MAX(dur) AS max_ns
FROM nsys_kernel
WHERE kind = 'communication'
GROUP BY device, stream, collective, name_id
ORDER BY device, total_ns DESC
