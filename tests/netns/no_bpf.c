// SPDX-License-Identifier: Apache-2.0
/*
 * no-bpf CMD [ARGS...]: runs CMD under a seccomp filter that fails every bpf() system call with
 * EPERM and allows everything else, as the container runtimes' default profiles (Kubernetes'
 * RuntimeDefault, podman's, docker's) do for a process without CAP_SYS_ADMIN. For the tests of
 * what harp says in such a pod.
 */
#include <errno.h>
#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

#if defined(__x86_64__)
#define THIS_ARCH AUDIT_ARCH_X86_64
#elif defined(__aarch64__)
#define THIS_ARCH AUDIT_ARCH_AARCH64
#else
#error "no-bpf: add this architecture's AUDIT_ARCH_ value"
#endif

int main(int argc, char **argv)
{
	struct sock_filter insns[] = {
		/* another architecture's calls (a 32-bit ABI) are refused outright */
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, THIS_ARCH, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, __NR_bpf, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (EPERM & SECCOMP_RET_DATA)),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };

	if (argc < 2) {
		fprintf(stderr, "usage: no-bpf CMD [ARGS...]\n");
		return 2;
	}
	if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0, 0)) {
		fprintf(stderr, "no-bpf: installing the seccomp filter failed: %s\n", strerror(errno));
		return 1;
	}
	execvp(argv[1], argv + 1);
	fprintf(stderr, "no-bpf: cannot run %s: %s\n", argv[1], strerror(errno));
	return 127;
}
