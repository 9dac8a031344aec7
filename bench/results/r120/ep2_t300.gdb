[New LWP 659]
[New LWP 664]
[New LWP 671]
[New LWP 672]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7ff3597d5000 (LWP 726)]
[New Thread 0x7ff01ed2e000 (LWP 727)]
[Detaching after fork from child process 728]
[Thread 0x7ff3597d5000 (LWP 726) exited]

Thread 1 "tpmoe" stopped.
0x00007ff37f898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 7 (Thread 0x7ff01ed2e000 (LWP 727) "tpmoe"):
#0  0x00007ff37f92a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff01f25d796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007ff01f25acf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007ff01f25cd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007ff01f26788a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007ff01f267d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007ff01f22090d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007ff01f475dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007ff37f89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007ff37f929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7ff01ffff000 (LWP 672) "tpmoe"):
#0  0x00007ff37f898d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff37f8a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007ff353ea35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007ff353d60374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007ff353f5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007ff353f53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007ff38ec128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007ff38ec738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x0000558dc5be1cb5 in cuda_forward ()
#9  0x0000558dc5baf94b in tpm_moe_forward ()
#10 0x0000558dc5b96e56 in rank_main ()
#11 0x00007ff37f89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007ff37f929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7ff0489e7000 (LWP 671) "tpmoe"):
#0  0x00007ff37f898d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff37f8a341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007ff01ee3bc89 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007ff01f15d2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007ff353eb0303 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007ff353e74448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007ff353e8e263 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007ff353ef2482 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007ff353edebe3 in cuLibraryLoadData () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007ff35cc44e85 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#10 0x00007ff35cc47572 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007ff35a62d433 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007ff35a78b2d0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007ff35a7b1378 in cublasLtTSTMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007ff38b7cdeb4 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#15 0x00007ff38b7cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007ff38b793330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007ff38ba3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007ff38ba3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007ff38b6e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x0000558dc5bd3c6f in tpm_moe_shared_dense(tpm_moe_dev const&, void*, unsigned short const*, int, CUstream_st*) ()
#21 0x0000558dc5bd1f77 in tpm_cuda_moe_experts ()
#22 0x0000558dc5be1a6a in cuda_forward ()
#23 0x0000558dc5baf94b in tpm_moe_forward ()
#24 0x0000558dc5b96e56 in rank_main ()
#25 0x00007ff37f89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#26 0x00007ff37f929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 3 (Thread 0x7ff136311000 (LWP 664) "cuda-EvtHandlr"):
#0  0x00007ff37f898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff37f89b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007ff01f25addb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007ff01f25cd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007ff01f0421fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007ff01f0a4939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007ff01ee404dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007ff01f15d2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007ff354b0493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007ff353fba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007ff353ebad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007ff37f89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007ff37f929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7ff350d76000 (LWP 659) "cuda00001400006"):
#0  0x00007ff37f91b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff353ecdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007ff353fba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007ff353ebad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007ff37f89cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007ff37f929ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7ff38ef30000 (LWP 656) "tpmoe"):
#0  0x00007ff37f898e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007ff37f89e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x0000558dc5b983bf in cmd_moe ()
#3  0x00007ff37f82a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007ff37f82a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x0000558dc5b85821 in _start ()
[Inferior 1 (process 656) detached]
