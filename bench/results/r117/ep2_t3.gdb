[New LWP 484]
[New LWP 489]
[New LWP 500]
[New LWP 501]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f7f473d5000 (LWP 551)]
[New Thread 0x7f7c0ed6f000 (LWP 552)]
[Detaching after fork from child process 553]
[Thread 0x7f7f473d5000 (LWP 551) exited]

Thread 1 "tpmoe" stopped.
0x00007f7f6d498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 7 (Thread 0x7f7c0ed6f000 (LWP 552) "tpmoe"):
#0  0x00007f7f6d52a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7c0f29e796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f7c0f29bcf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7c0f29dd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7c0f2a888a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7c0f2a8d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7c0f26190d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7c0f4b6dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f7f6d49cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f7f6d529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f7c5e98b000 (LWP 501) "tpmoe"):
#0  0x00007f7f6d498d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7f6d4a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7f41aa35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f7f41960374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f7f41b5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f7f41b53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f7f7c8128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007f7f7c8738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x000055dce2f10955 in cuda_forward ()
#9  0x000055dce2ede94b in tpm_moe_forward ()
#10 0x000055dce2ec5e56 in rank_main ()
#11 0x00007f7f6d49cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f7f6d529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f7c5f18c000 (LWP 500) "tpmoe"):
#0  0x00007f7f6d498d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7f6d4a341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7c0ee7cc89 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7c0f19e2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7f41ab0303 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f7f41a74448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f7f41a8e263 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f7f41af2482 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f7f41adebe3 in cuLibraryLoadData () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f7f48d11886 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#10 0x00007f7f4924d0bb in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f7f491fe8bf in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f7f48e11a4b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f7f48e12458 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f7f48e12632 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f7f48e1355e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#16 0x00007f7f48222913 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#17 0x00007f7f48246aa5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#18 0x00007f7f482471a0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#19 0x00007f7f4826386f in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#20 0x00007f7f482af890 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#21 0x00007f7f4835e535 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#22 0x00007f7f4835e81b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#23 0x00007f7f483b1b68 in cublasLtTSTMatmulAlgoGetHeuristic () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#24 0x00007f7f793cd01e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#25 0x00007f7f793cdfab in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#26 0x00007f7f793cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#27 0x00007f7f79393330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#28 0x00007f7f7963e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#29 0x00007f7f7963ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13

Thread 3 (Thread 0x7f7d23fee000 (LWP 489) "cuda-EvtHandlr"):
#0  0x00007f7f6d498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7f6d49b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f7c0f29bddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f7c0f29dd5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f7c0f0831fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f7c0f0e5939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f7c0ee814dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f7c0f19e2a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f7f4270493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f7f41bba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f7f41abad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f7f6d49cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f7f6d529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f7f3ea77000 (LWP 484) "cuda00001400006"):
#0  0x00007f7f6d51b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7f41acdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f7f41bba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f7f41abad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f7f6d49cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f7f6d529ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f7f791fd000 (LWP 481) "tpmoe"):
#0  0x00007f7f6d498e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f7f6d49e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x000055dce2ec73bf in cmd_moe ()
#3  0x00007f7f6d42a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f7f6d42a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x000055dce2eb4821 in _start ()
[Thread 0x7f7c5e98b000 (LWP 501) exited]
[Inferior 1 (process 481) detached]
