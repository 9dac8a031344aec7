[New LWP 559]
[New LWP 564]
[New LWP 571]
[New LWP 572]
[New LWP 573]
[New LWP 574]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f8c7bbd5000 (LWP 624)]
[New Thread 0x7f886a52d000 (LWP 625)]
[Detaching after fork from child process 626]
[Thread 0x7f8c7bbd5000 (LWP 624) exited]

Thread 1 "tpmoe" stopped.
0x00007f8ca1c98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 9 (Thread 0x7f886a52d000 (LWP 625) "tpmoe"):
#0  0x00007f8ca1d2a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f886aa5c796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f886aa59cf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886aa5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f886aa6688a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f886aa66d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f886aa1f90d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f886ac74dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 7 (Thread 0x7f886b7fe000 (LWP 574) "tpmoe"):
#0  0x00007f8ca1c98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1ca341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f886a63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886a95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f8c76f6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f8c7617e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f8c7618a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f8c7618aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f8c7635e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8c76353c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f8c7eec9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f8c7f048295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f8c7ca2d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f8c7cb8bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f8c7cbafa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f8cadbc9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f8cadbcb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f8cadb938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f8cade3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f8cade3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f8cadae178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055df4cff0b2b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055df4cfec75e in tpm_cuda_moe_route ()
#23 0x000055df4cffca44 in cuda_forward ()
#24 0x000055df4cfca94b in tpm_moe_forward ()
#25 0x000055df4cfb1e56 in rank_main ()
#26 0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 6 (Thread 0x7f8863fff000 (LWP 573) "tpmoe"):
#0  0x00007f8ca1c98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1ca341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f886a63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886a95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f8c76f6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f8c7617e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f8c7618a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f8c7618aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f8c7635e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8c76353c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f8c7eec9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f8c7f048295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f8c7ca2d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f8c7cb8bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f8c7cbafa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f8cadbc9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f8cadbcb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f8cadb938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f8cade3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f8cade3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f8cadae178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055df4cff0b2b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055df4cfec75e in tpm_cuda_moe_route ()
#23 0x000055df4cffca44 in cuda_forward ()
#24 0x000055df4cfca94b in tpm_moe_forward ()
#25 0x000055df4cfb1e56 in rank_main ()
#26 0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f886bfff000 (LWP 572) "tpmoe"):
#0  0x00007f8ca1c98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1ca341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f886a63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886a95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f8c76f6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f8c7617e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f8c7618a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f8c7618aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f8c7635e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8c76353c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f8c7eec9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f8c7f048295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f8c7ca2d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f8c7cb8bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f8c7cbafa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f8cadbc9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f8cadbcb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f8cadb938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f8cade3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f8cade3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f8cadae178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055df4cff0b2b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055df4cfec75e in tpm_cuda_moe_route ()
#23 0x000055df4cffca44 in cuda_forward ()
#24 0x000055df4cfca94b in tpm_moe_forward ()
#25 0x000055df4cfb1e56 in rank_main ()
#26 0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f88dcffe000 (LWP 571) "tpmoe"):
#0  0x00007f8ca1c98d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1ca341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f886a63989b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886a95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f8c76f6e393 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f8c7617e0f5 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f8c7618a078 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f8c7618aa1e in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f8c7635e4eb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8c76353c30 in cuLaunchKernelEx () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f8c7eec9091 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f8c7f048295 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f8c7ca2d1a3 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f8c7cb8bc40 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f8c7cbafa68 in cublasLtTSSMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f8cadbc9444 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f8cadbcb445 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f8cadb938dd in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f8cade3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f8cade3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f8cadae178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x000055df4cff0b2b in tpm_moe_launch_route(tpm_moe_dev const&, void*, unsigned short const*, int, int, int, int, CUstream_st*) ()
#22 0x000055df4cfec75e in tpm_cuda_moe_route ()
#23 0x000055df4cffca44 in cuda_forward ()
#24 0x000055df4cfca94b in tpm_moe_forward ()
#25 0x000055df4cfb1e56 in rank_main ()
#26 0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 3 (Thread 0x7f8a582aa000 (LWP 564) "cuda-EvtHandlr"):
#0  0x00007f8ca1c98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1c9b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f886aa59ddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f886aa5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f886a8411fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f886a8a3939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f886a63f4dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f886a95c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f8c76f0493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8c763ba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f8c762bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f8c73277000 (LWP 559) "cuda00001400006"):
#0  0x00007f8ca1d1b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8c762cdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f8c763ba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f8c762bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f8ca1c9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f8ca1d29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f8cb1327000 (LWP 556) "tpmoe"):
#0  0x00007f8ca1c98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f8ca1c9e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x000055df4cfb33bf in cmd_moe ()
#3  0x00007f8ca1c2a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f8ca1c2a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x000055df4cfa0821 in _start ()
[Inferior 1 (process 556) detached]
