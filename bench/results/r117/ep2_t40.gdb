[New LWP 590]
[New LWP 595]
[New LWP 602]
[New LWP 603]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f4adb5d5000 (LWP 657)]
[New Thread 0x7f47aa948000 (LWP 658)]
[Detaching after fork from child process 659]
[Thread 0x7f4adb5d5000 (LWP 657) exited]

Thread 1 "tpmoe" stopped.
0x00007f4b01698e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
No CUDA kernels.

Thread 7 (Thread 0x7f47aa948000 (LWP 658) "tpmoe"):
#0  0x00007f4b0172a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f47aae77796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f47aae74cf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f47aae76d5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f47aae8188a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f47aae81d9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f47aae3a90d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f47ab08fdfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f4b0169cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f4b01729ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f47abfff000 (LWP 603) "tpmoe"):
#0  0x00007f4b01698d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f4b016a296a in pthread_rwlock_rdlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f4ad5ca35e8 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f4ad5b60374 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f4ad5d5db82 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f4ad5d53a00 in cuEventRecord () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f4b10a128db in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#7  0x00007f4b10a738a2 in cudaEventRecord () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#8  0x00005556b2fdc955 in cuda_forward ()
#9  0x00005556b2faa94b in tpm_moe_forward ()
#10 0x00005556b2f91e56 in rank_main ()
#11 0x00007f4b0169cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f4b01729ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f47f2f4e000 (LWP 602) "tpmoe"):
#0  0x00007f4b01698d17 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f4b016a341b in pthread_rwlock_wrlock () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f47aaa55c89 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f47aad772a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f4ad5cb0303 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f4ad5c74448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f4ad5c8e263 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f4ad5cf2482 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f4ad5cdebe3 in cuLibraryLoadData () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f4adcf11886 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#10 0x00007f4add44d0bb in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f4add3fe8bf in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f4add011a4b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f4add012458 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f4add012632 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f4add01355e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#16 0x00007f4adc422913 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#17 0x00007f4adc446aa5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#18 0x00007f4adc4471a0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#19 0x00007f4adc46386f in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#20 0x00007f4adc4af890 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#21 0x00007f4adc55e535 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#22 0x00007f4adc55e81b in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#23 0x00007f4adc5b1b68 in cublasLtTSTMatmulAlgoGetHeuristic () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#24 0x00007f4b0d5cd01e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#25 0x00007f4b0d5cdfab in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#26 0x00007f4b0d5cfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#27 0x00007f4b0d593330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#28 0x00007f4b0d83e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#29 0x00007f4b0d83ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13

Thread 3 (Thread 0x7f48b814b000 (LWP 595) "cuda-EvtHandlr"):
#0  0x00007f4b01698e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f4b0169b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f47aae74ddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f47aae76d5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f47aac5c1fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f47aacbe939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f47aaa5a4dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f47aad772a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f4ad690493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f4ad5dba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f4ad5cbad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f4b0169cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f4b01729ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f4ad2b76000 (LWP 590) "cuda00001400006"):
#0  0x00007f4b0171b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f4ad5ccdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f4ad5dba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f4ad5cbad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f4b0169cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f4b01729ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f4b01df8000 (LWP 587) "tpmoe"):
#0  0x00007f4b01698e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f4b0169e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00005556b2f933bf in cmd_moe ()
#3  0x00007f4b0162a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f4b0162a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00005556b2f80821 in _start ()
[Inferior 1 (process 587) detached]
