[New LWP 827]
[New LWP 832]
[New LWP 834]
[New LWP 835]
[Thread debugging using libthread_db enabled]
Using host libthread_db library "/lib/x86_64-linux-gnu/libthread_db.so.1".
[New Thread 0x7f6844bd5000 (LWP 890)]
[New Thread 0x7f6561012000 (LWP 891)]
[Detaching after fork from child process 892]
[Thread 0x7f6844bd5000 (LWP 890) exited]

Thread 1 "tpmoe" stopped.
[Switching focus to CUDA kernel 0, grid 25, block (0,0,0), thread (0,0,0), device 0, sm 124, warp 0, lane 0]
tpm_cuda::(anonymous namespace)::oneshot2_kernel<0, true, false><<<(1,1,1),(256,1,1)>>> () at /work/main/src/comm/cuda_sync.h:307 in _ZN8tpm_cuda4WordILi0EE5validE5uint4 inlined from cuda_oneshot.cu:226
307	                ok &= (x[k] & 0xffffu) != 0xffffu && (x[k] >> 16) != 0xffffu;
  Kernel Parent Dev Grid Status                             SMs Mask GridDim  BlockDim Invocation                                                         
*      0      -   0   25 Active 0x0010000000000000000000000000000000 (1,1,1) (256,1,1) tpm_cuda::(anonymous namespace)::oneshot2_kernel<0, true, false>() 

Thread 7 (Thread 0x7f6561012000 (LWP 891) "tpmoe"):
#0  0x00007f686ad2a2d2 in epoll_wait () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f6561541796 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#2  0x00007f656153ecf9 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f6561540d5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f656154b88a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f656154bd9b in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f656150490d in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f6561759dfd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f686ac9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#9  0x00007f686ad29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 5 (Thread 0x7f662d542000 (LWP 835) "tpmoe"):
#0  0x00007f683f1d36ba in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#1  0x00007f683f2121bb in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f683ff51f17 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f683ff52365 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f683f1dfe24 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f683f235942 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f683f317bfc in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f683f3050b0 in cuEventSynchronize () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f687a012a22 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#9  0x00007f687a04d1d8 in cudaEventSynchronize () from /usr/local/cuda/targets/x86_64-linux/lib/libcudart.so.13
#10 0x00005598e6cc8449 in cuda_collect ()
#11 0x00005598e6c96c32 in tpm_moe_last_stats ()
#12 0x00005598e6c7de23 in rank_main ()
#13 0x00007f686ac9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#14 0x00007f686ad29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 4 (Thread 0x7f662dd43000 (LWP 834) "tpmoe"):
#0  0x00007f683f3b960d in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#1  0x00007f683ff52040 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f683f1dfe24 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f683ff50589 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f683f2afc58 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#5  0x00007f683f274448 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#6  0x00007f683f274855 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#7  0x00007f683f16d819 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#8  0x00007f683f2f438a in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f683f2df560 in cuKernelSetAttribute () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f684804370e in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#11 0x00007f6848047572 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#12 0x00007f6845a2d433 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#13 0x00007f6845b8b2d0 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#14 0x00007f6845bb1378 in cublasLtTSTMatmul () from /usr/local/cuda/targets/x86_64-linux/lib/libcublasLt.so.13
#15 0x00007f6876bcdeb4 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#16 0x00007f6876bcfeb5 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#17 0x00007f6876b93330 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#18 0x00007f6876e3e489 in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#19 0x00007f6876e3ec8d in ?? () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#20 0x00007f6876ae178e in cublasGemmEx () from /usr/local/cuda/targets/x86_64-linux/lib/libcublas.so.13
#21 0x00005598e6cba90f in tpm_moe_shared_dense(tpm_moe_dev const&, void*, unsigned short const*, int, CUstream_st*) ()
#22 0x00005598e6cb8a85 in tpm_cuda_moe_route ()
#23 0x00005598e6cc86e4 in cuda_forward ()
#24 0x00005598e6c9694b in tpm_moe_forward ()
#25 0x00005598e6c7de56 in rank_main ()
#26 0x00007f686ac9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#27 0x00007f686ad29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 3 (Thread 0x7f683a480000 (LWP 832) "cuda-EvtHandlr"):
#0  0x00007f686ac98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f686ac9b8cd in pthread_cond_wait () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00007f656153eddb in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#3  0x00007f6561540d5a in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#4  0x00007f65613261fd in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#5  0x00007f6561388939 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#6  0x00007f65611244dc in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#7  0x00007f65614412a6 in ?? () from /usr/local/nvidia/lib64/libcudadebugger.so.1
#8  0x00007f683ff0493b in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#9  0x00007f683f3ba9c4 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#10 0x00007f683f2bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#11 0x00007f686ac9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#12 0x00007f686ad29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 2 (Thread 0x7f683c1f6000 (LWP 827) "cuda00001400006"):
#0  0x00007f686ad1b79d in poll () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f683f2cdf27 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#2  0x00007f683f3ba967 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#3  0x00007f683f2bad73 in ?? () from /usr/local/nvidia/lib64/libcuda.so.1
#4  0x00007f686ac9cb84 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00007f686ad29ecc in ?? () from /lib/x86_64-linux-gnu/libc.so.6

Thread 1 (Thread 0x7f687a2e1000 (LWP 824) "tpmoe"):
#0  0x00007f686ac98e51 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#1  0x00007f686ac9e883 in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#2  0x00005598e6c7f3bf in cmd_moe ()
#3  0x00007f686ac2a1ca in ?? () from /lib/x86_64-linux-gnu/libc.so.6
#4  0x00007f686ac2a28b in __libc_start_main () from /lib/x86_64-linux-gnu/libc.so.6
#5  0x00005598e6c6c821 in _start ()
[Inferior 1 (process 824) detached]
