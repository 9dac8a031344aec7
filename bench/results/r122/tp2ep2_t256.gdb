[New LWP 460]
[New LWP 469]
[New LWP 479]
[New LWP 480]
[New LWP 481]
[New LWP 482]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f19fd9d5000 (LWP 529)]
[New Thread 0x7f15e7fff000 (LWP 530)]
[Detaching after fork from child process 531]
[Thread 0x7f19fd9d5000 (LWP 529) exited]

Thread 1 "tpmoe" stopped.
0x00007f1a23a98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 9 (Thread 0x7f15e7fff000 (LWP 530) "tpmoe"):
#0  0x00007f1a23b2a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f15eca5c796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f15eca59cf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f15eca5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f15eca6688a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f15eca66d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f15eca1f90d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f15ecc74dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 7 (Thread 0x7f15ed7fe000 (LWP 482) "tpmoe"):
#0  0x00007f1a23a98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23aa341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f15ec63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f15ec95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f19f8d6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f19f7f7e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f19f7f8a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f19f7f8aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f19f815e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f19f8153c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f1a00cc9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f1a00e48295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f19fe82d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f19fe98bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f19fe9afa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f1a2f9c9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f1a2f9cb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f1a2f9938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f1a2fc3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f1a2fc3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f1a2f8e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055e2d6e3ef4b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055e2d6e3a8ae in tpm_cuda_moe_route ()
#23 0x000055e2d6e4ae64 in cuda_forward ()
#24 0x000055e2d6e1894b in tpm_moe_forward ()
#25 0x000055e2d6dffe56 in rank_main ()
#26 0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 6 (Thread 0x7f15e55ff000 (LWP 481) "tpmoe"):
#0  0x00007f1a23a98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23aa341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f15ec63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f15ec95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f19f8d6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f19f7f7e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f19f7f8a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f19f7f8aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f19f815e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f19f8153c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f1a00cc9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f1a00e48295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f19fe82d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f19fe98bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f19fe9afa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f1a2f9c9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f1a2f9cb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f1a2f9938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f1a2fc3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f1a2fc3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f1a2f8e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055e2d6e3ef4b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055e2d6e3a8ae in tpm_cuda_moe_route ()
#23 0x000055e2d6e4ae64 in cuda_forward ()
#24 0x000055e2d6e1894b in tpm_moe_forward ()
#25 0x000055e2d6dffe56 in rank_main ()
#26 0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f15edfff000 (LWP 480) "tpmoe"):
#0  0x00007f1a23a98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23aa3565 in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f19f8d16c12 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f19f7f826a9 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f19f8d135da in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f19f7f72a85 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f19f8132a1a in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f19f812eb90 in cuMemcpyDtoH_v2 () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f1a32e421d9 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#9  0x00007f1a32e16754 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#10 0x00007f1a32e6e52f in cudaMemcpy () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#11 0x000055e2d6e3bf60 in tpm_cuda_moe_read_routing ()
#12 0x000055e2d6e4a299 in collect_chunk ()
#13 0x000055e2d6e4a8eb in cuda_collect ()
#14 0x000055e2d6e18c32 in tpm_moe_last_stats ()
#15 0x000055e2d6dffe23 in rank_main ()
#16 0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#17 0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f165ee06000 (LWP 479) "tpmoe"):
#0  0x00007f1a23a98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23aa341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f15ec63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f15ec95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f19f8d6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f19f7f7e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f19f7f8a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f19f7f8aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f19f815e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f19f8153c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f1a00cc9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f1a00e48295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f19fe82d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f19fe98bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f19fe9afa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f1a2f9c9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f1a2f9cb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f1a2f9938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f1a2fc3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f1a2fc3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f1a2f8e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055e2d6e3ef4b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055e2d6e3a8ae in tpm_cuda_moe_route ()
#23 0x000055e2d6e4ae64 in cuda_forward ()
#24 0x000055e2d6e1894b in tpm_moe_forward ()
#25 0x000055e2d6dffe56 in rank_main ()
#26 0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 3 (Thread 0x7f17da5ef000 (LWP 469) "cuda-EvtHandlr"):
#0  0x00007f1a23a98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23a9b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f15eca59ddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f15eca5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f15ec8411fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f15ec8a3939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f15ec63f4dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f15ec95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f19f8d0493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f19f81ba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f19f80bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f19f5077000 (LWP 460) "cuda00001400006"):
#0  0x00007f1a23b1b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f19f80cdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f19f81ba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f19f80bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f1a23a9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f1a23b29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f1a3313c000 (LWP 455) "tpmoe"):
#0  0x00007f1a23a98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f1a23a9e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x000055e2d6e013bf in cmd_moe ()
#3  0x00007f1a23a2a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f1a23a2a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x000055e2d6dee821 in _start ()
[Inferior 1 (process 455) detached]
