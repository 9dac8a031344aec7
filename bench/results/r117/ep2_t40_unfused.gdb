[New LWP 696]
[New LWP 701]
[New LWP 706]
[New LWP 707]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f80f47d5000 (LWP 759)]
[New Thread 0x7f7dc483d000 (LWP 760)]
[Detaching after fork from child process 761]
[Thread 0x7f80f47d5000 (LWP 759) exited]

Thread 1 "tpmoe" stopped.
0x00007f811a898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 7 (Thread 0x7f7dc483d000 (LWP 760) "tpmoe"):
#0  0x00007f811a92a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7db7a5e796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f7db7a5bcf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7db7a5dd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7db7a6888a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7db7a68d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7db7a2190d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7db7c76dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f811a89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f811a929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f7dc57fe000 (LWP 707) "tpmoe"):
#0  0x00007f811a898d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f811a8a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f80eeea35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f80eed60374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f80eef5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f80eef53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f8129c128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007f8129c738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x000055ad9b8b3955 in cuda_forward ()
#9  0x000055ad9b88194b in tpm_moe_forward ()
#10 0x000055ad9b868e56 in rank_main ()
#11 0x00007f811a89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f811a929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f7dc5fff000 (LWP 706) "tpmoe"):
#0  0x00007f811a898d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f811a8a341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7db763cc89 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7db795e2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f80eeeb0303 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f80eee74448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f80eee8e263 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f80eeef2482 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f80eeedebe3 in cuLibraryLoadData () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f80f6111886 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#10 0x00007f80f664d0bb in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f80f65fe8bf in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f80f6211a4b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f80f6212458 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f80f6212632 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f80f621355e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#16 0x00007f80f5622913 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#17 0x00007f80f5646aa5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#18 0x00007f80f56471a0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#19 0x00007f80f566386f in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#20 0x00007f80f56af890 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#21 0x00007f80f575e535 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#22 0x00007f80f575e81b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#23 0x00007f80f57b1b68 in cublasLtTSTMatmulAlgoGetHeuristic () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#24 0x00007f81267cd01e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#25 0x00007f81267cdfab in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#26 0x00007f81267cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#27 0x00007f8126793330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#28 0x00007f8126a3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#29 0x00007f8126a3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13

Thread 3 (Thread 0x7f7ed1364000 (LWP 701) "cuda-EvtHandlr"):
#0  0x00007f811a898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f811a89b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7db7a5bddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7db7a5dd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7db78431fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7db78a5939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7db76414dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7db795e2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f80efb0493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f80eefba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f80eeebad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f811a89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f811a929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f80ebe77000 (LWP 696) "cuda00001400006"):
#0  0x00007f811a91b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f80eeecdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f80eefba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f80eeebad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f811a89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f811a929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f8129bfd000 (LWP 693) "tpmoe"):
#0  0x00007f811a898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f811a89e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x000055ad9b86a3bf in cmd_moe ()
#3  0x00007f811a82a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f811a82a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x000055ad9b857821 in _start ()
[Inferior 1 (process 693) detached]
