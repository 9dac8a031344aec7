[New LWP 449]
[New LWP 454]
[New LWP 466]
[New LWP 467]
[New LWP 468]
[New LWP 469]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f82623d5000 (LWP 519)]
[New Thread 0x7f7e3bfff000 (LWP 520)]
[Detaching after fork from child process 521]
[Thread 0x7f82623d5000 (LWP 519) exited]

Thread 1 "tpmoe" stopped.
0x00007f8288498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 9 (Thread 0x7f7e3bfff000 (LWP 520) "tpmoe"):
#0  0x00007f828852a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7e50a5c796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f7e50a59cf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7e50a5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7e50a6688a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7e50a66d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7e50a1f90d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7e50c74dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 7 (Thread 0x7f7e517fe000 (LWP 469) "tpmoe"):
#0  0x00007f8288498d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f82884a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f825caa35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f825c960374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f825cb5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f825cb53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f82978128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007f82978738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x0000563fcdcb0cb5 in cuda_forward ()
#9  0x0000563fcdc7e94b in tpm_moe_forward ()
#10 0x0000563fcdc65e56 in rank_main ()
#11 0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 6 (Thread 0x7f7e51fff000 (LWP 468) "tpmoe"):
#0  0x00007f8288498d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f82884a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f825caa35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f825c960374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f825cb5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f825cb53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f82978128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007f82978738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x0000563fcdcb0cb5 in cuda_forward ()
#9  0x0000563fcdc7e94b in tpm_moe_forward ()
#10 0x0000563fcdc65e56 in rank_main ()
#11 0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f7ec2d6b000 (LWP 467) "tpmoe"):
#0  0x00007f8288499050 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f82884a01e1 in pthread_mutex_lock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f8265842e83 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#3  0x00007f8265847572 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#4  0x00007f826322d433 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#5  0x00007f826338b2d0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#6  0x00007f82633b1378 in cublasLtTSTMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#7  0x00007f82943cdeb4 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#8  0x00007f82943cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#9  0x00007f8294393330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#10 0x00007f829463e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#11 0x00007f829463ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#12 0x00007f82942e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#13 0x0000563fcdca2c6f in tpm_moe_shared_dense(tpm_moe_dev const&, void*, unsigned short const*, int, CUstream_st*) ()
#14 0x0000563fcdca0f77 in tpm_cuda_moe_experts ()
#15 0x0000563fcdcb0a6a in cuda_forward ()
#16 0x0000563fcdc7e94b in tpm_moe_forward ()
#17 0x0000563fcdc65e56 in rank_main ()
#18 0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#19 0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f7ec356c000 (LWP 466) "tpmoe"):
#0  0x00007f8288498d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f82884a341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7e5063ac89 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7e5095c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f825cab0303 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f825ca74448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f825ca8e263 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f825caf2482 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f825cadebe3 in cuLibraryLoadData () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f8265844e85 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#10 0x00007f8265847572 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f826322d433 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f826338b2d0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f82633b1378 in cublasLtTSTMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f82943cdeb4 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#15 0x00007f82943cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f8294393330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f829463e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f829463ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f82942e178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x0000563fcdca2c6f in tpm_moe_shared_dense(tpm_moe_dev const&, void*, unsigned short const*, int, CUstream_st*) ()
#21 0x0000563fcdca0f77 in tpm_cuda_moe_experts ()
#22 0x0000563fcdcb0a6a in cuda_forward ()
#23 0x0000563fcdc7e94b in tpm_moe_forward ()
#24 0x0000563fcdc65e56 in rank_main ()
#25 0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#26 0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 3 (Thread 0x7f803ef2a000 (LWP 454) "cuda-EvtHandlr"):
#0  0x00007f8288498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f828849b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7e50a59ddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7e50a5bd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7e508411fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7e508a3939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7e5063f4dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7e5095c2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f825d70493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f825cbba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f825cabad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f8259976000 (LWP 449) "cuda00001400006"):
#0  0x00007f828851b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f825cacdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f825cbba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f825cabad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f828849cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f8288529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f8297af7000 (LWP 446) "tpmoe"):
#0  0x00007f8288498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f828849e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x0000563fcdc673bf in cmd_moe ()
#3  0x00007f828842a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f828842a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x0000563fcdc54821 in _start ()
[Inferior 1 (process 446) detached]
