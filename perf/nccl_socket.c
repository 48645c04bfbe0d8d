// SPDX-License-Identifier: Apache-2.0
/*
 * NCCL's socket transport without a GPU (nccl_socket.h). NCCL links it in as a table,
 * ncclNetSocket, in the layout of its release's net plugin API; the symbol is local, so it is
 * found in the library's ELF symbol table (.symtab) and placed at the address the library was
 * loaded at. Its connect and accept ask CUDA for the current device (statically linked CUDA
 * runtime, also local); with no driver that fails, so that one function is rewritten in memory
 * to answer "device 0, success". Nothing else of NCCL is touched.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE
#endif
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <glob.h>
#include <link.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "nccl_socket.h"

#define LIB_NAME "libnccl.so.2"
#define WHEEL_DIR "nvidia/nccl/lib" /* where the nvidia-nccl wheels put it */

/* What was tried, for the message when nothing served. */
struct search {
	char text[3072];
	size_t used;
};

static void tried(struct search *s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void tried(struct search *s, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (s->used >= sizeof(s->text) - 1) {
		return;
	}
	va_start(ap, fmt);
	n = vsnprintf(s->text + s->used, sizeof(s->text) - s->used, fmt, ap);
	va_end(ap);
	if (n > 0) {
		s->used += (size_t)n;
		s->used = s->used < sizeof(s->text) ? s->used : sizeof(s->text) - 1;
	}
}

static void *try_file(struct search *s, const char *path)
{
	void *lib;

	if (access(path, R_OK)) {
		tried(s, "\n  %s: %s", path, strerror(errno));
		return NULL;
	}
	lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!lib) {
		tried(s, "\n  %s: %s", path, dlerror());
	}
	return lib;
}

/* Every file matching pattern, in order; the pattern itself is said when none does. */
static void *try_glob(struct search *s, const char *pattern)
{
	char seen[4200];
	glob_t g;
	void *lib = NULL;
	size_t i;

	snprintf(seen, sizeof(seen), "\n  %s:", pattern);
	if (strstr(s->text, seen)) {
		return NULL; /* tried already (CUDA_HOME is often /usr/local/cuda) */
	}
	if (glob(pattern, 0, NULL, &g)) {
		tried(s, "\n  %s: none", pattern);
		return NULL;
	}
	for (i = 0; i < g.gl_pathc && !lib; i++) {
		lib = try_file(s, g.gl_pathv[i]);
	}
	globfree(&g);
	return lib;
}

/* dir/tail/libnccl.so.2, as a glob pattern (dir may be NULL or empty: nothing tried). */
static void *try_under(struct search *s, const char *dir, const char *tail)
{
	char pattern[4096];

	if (!dir || !*dir) {
		return NULL;
	}
	snprintf(pattern, sizeof(pattern), "%s/%s/" LIB_NAME, dir, tail);
	return try_glob(s, pattern);
}

static void *nccl_load(struct search *s)
{
	static const char *const cuda_dirs[] = { "/usr/local/cuda", "/usr/local/cuda-*" };
	static const char *const python_dirs[] = { "/usr/local/lib", "/usr/lib", "/opt/conda/lib" };
	const char *env = getenv("NCCL_LIB"), *home = getenv("HOME");
	char path[4096], *paths, *dir, *save = NULL;
	struct stat st;
	void *lib;
	size_t i;

	if (env && *env) {
		/* the user named it: that one or none */
		if (!stat(env, &st) && S_ISDIR(st.st_mode)) {
			snprintf(path, sizeof(path), "%s/" LIB_NAME, env);
			env = path;
		}
		tried(s, "\n  (NCCL_LIB names the library; nothing else is searched)");
		return try_file(s, env);
	}
	lib = dlopen(LIB_NAME, RTLD_NOW | RTLD_LOCAL);
	if (lib) {
		return lib;
	}
	tried(s, "\n  the dynamic loader's search (LD_LIBRARY_PATH, ld.so.cache): %s", dlerror());
	for (i = 0; i < 2; i++) {
		const char *cuda = getenv(i ? "CUDA_PATH" : "CUDA_HOME");

		if ((lib = try_under(s, cuda, "lib64")) || (lib = try_under(s, cuda, "lib"))) {
			return lib;
		}
	}
	for (i = 0; i < sizeof(cuda_dirs) / sizeof(cuda_dirs[0]); i++) {
		if ((lib = try_under(s, cuda_dirs[i], "lib64")) ||
		    (lib = try_under(s, cuda_dirs[i], "lib"))) {
			return lib;
		}
	}
	/* the nvidia-nccl wheels: a virtual environment, conda, PYTHONPATH, the user's and the
	 * system's site-packages */
	if ((lib = try_under(s, getenv("VIRTUAL_ENV"), "lib/python3*/site-packages/" WHEEL_DIR)) ||
	    (lib = try_under(s, getenv("CONDA_PREFIX"), "lib/python3*/site-packages/" WHEEL_DIR))) {
		return lib;
	}
	paths = getenv("PYTHONPATH") ? strdup(getenv("PYTHONPATH")) : NULL;
	for (dir = paths ? strtok_r(paths, ":", &save) : NULL; dir && !lib;
	     dir = strtok_r(NULL, ":", &save)) {
		lib = try_under(s, dir, WHEEL_DIR);
	}
	free(paths);
	if (lib || (lib = try_under(s, home, ".local/lib/python3*/site-packages/" WHEEL_DIR))) {
		return lib;
	}
	for (i = 0; i < sizeof(python_dirs) / sizeof(python_dirs[0]); i++) {
		if ((lib = try_under(s, python_dirs[i], "python3*/*-packages/" WHEEL_DIR))) {
			return lib;
		}
	}
	return NULL;
}

/* The local symbols this needs, as offsets from the library's load address. */
struct nccl_syms {
	uint64_t net_socket, net_socket_size;
	uint64_t get_device, get_device_size;
};

static bool in_file(uint64_t off, uint64_t len, uint64_t size)
{
	return off <= size && len <= size - off;
}

/* Reads file's .symtab for the symbols; 0, or -1 with why. */
static int find_syms(const char *file, struct nccl_syms *out, char *why, size_t whylen)
{
	const Elf64_Ehdr *eh;
	const Elf64_Shdr *sh;
	struct stat st;
	uint8_t *map;
	uint64_t size;
	int fd, rc = -1;
	unsigned i;

	memset(out, 0, sizeof(*out));
	fd = open(file, O_RDONLY | O_CLOEXEC);
	if (fd < 0 || fstat(fd, &st)) {
		snprintf(why, whylen, "%s: %s", file, strerror(errno));
		if (fd >= 0) {
			close(fd);
		}
		return -1;
	}
	size = (uint64_t)st.st_size;
	map = size >= sizeof(*eh) ? mmap(NULL, size, PROT_READ, MAP_PRIVATE, fd, 0) : MAP_FAILED;
	close(fd);
	if (map == MAP_FAILED) {
		snprintf(why, whylen, "%s: not an ELF file it can read", file);
		return -1;
	}
	eh = (const Elf64_Ehdr *)map;
	if (memcmp(eh->e_ident, ELFMAG, SELFMAG) || eh->e_ident[EI_CLASS] != ELFCLASS64 ||
	    eh->e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_file(eh->e_shoff, (uint64_t)eh->e_shnum * sizeof(Elf64_Shdr), size)) {
		snprintf(why, whylen, "%s: not a 64-bit ELF library", file);
		goto out;
	}
	sh = (const Elf64_Shdr *)(map + eh->e_shoff);
	for (i = 0; i < eh->e_shnum; i++) {
		const Elf64_Shdr *strs;
		const Elf64_Sym *sym;
		uint64_t n, k;

		if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum ||
		    sh[i].sh_entsize != sizeof(Elf64_Sym) ||
		    !in_file(sh[i].sh_offset, sh[i].sh_size, size)) {
			continue;
		}
		strs = &sh[sh[i].sh_link];
		if (!in_file(strs->sh_offset, strs->sh_size, size)) {
			continue;
		}
		sym = (const Elf64_Sym *)(map + sh[i].sh_offset);
		n = sh[i].sh_size / sizeof(Elf64_Sym);
		for (k = 0; k < n; k++) {
			const char *name;

			if (sym[k].st_name >= strs->sh_size || !sym[k].st_value) {
				continue;
			}
			name = (const char *)map + strs->sh_offset + sym[k].st_name;
			if (strnlen(name, strs->sh_size - sym[k].st_name) ==
			    strs->sh_size - sym[k].st_name) {
				continue; /* runs off the string table */
			}
			if (!strcmp(name, "ncclNetSocket") && ELF64_ST_TYPE(sym[k].st_info) == STT_OBJECT) {
				out->net_socket = sym[k].st_value;
				out->net_socket_size = sym[k].st_size;
			} else if (!strcmp(name, "cudaGetDevice") &&
				   ELF64_ST_TYPE(sym[k].st_info) == STT_FUNC) {
				out->get_device = sym[k].st_value;
				out->get_device_size = sym[k].st_size;
			}
		}
		rc = 0;
	}
	if (rc) {
		snprintf(why, whylen, "%s has no symbol table (a stripped build): ncclNetSocket, a "
			 "local symbol, cannot be found", file);
	} else if (!out->net_socket || !out->get_device) {
		snprintf(why, whylen, "%s: its symbol table lacks %s", file,
			 !out->net_socket ? "ncclNetSocket" : "cudaGetDevice");
		rc = -1;
	}
out:
	munmap(map, size);
	return rc;
}

/* The net plugin API version of NCCL's internal tables in release code (major*10000+minor*100
 * +patch): 0 where this does not know it. From NCCL's src/include/net.h, release by release. */
static int table_version(int code)
{
	int minor = code / 100 % 100;

	if (code / 10000 != 2 || minor < 20 || minor > 29) {
		return 0;
	}
	return minor <= 23 ? 8 : minor <= 25 ? 9 : minor <= 27 ? 10 : 11;
}

/* Rewrites n bytes of code at at (its pages made writable for the copy, then not). */
static int patch_code(void *at, const uint8_t *code, size_t n)
{
	uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE);
	uintptr_t start = (uintptr_t)at & ~(page - 1);
	uintptr_t end = ((uintptr_t)at + n + page - 1) & ~(page - 1);

	if (mprotect((void *)start, end - start, PROT_READ | PROT_WRITE | PROT_EXEC)) {
		return -errno;
	}
	memcpy(at, code, n);
	__builtin___clear_cache((char *)at, (char *)at + n);
	return mprotect((void *)start, end - start, PROT_READ | PROT_EXEC) ? -errno : 0;
}

int nccl_socket_open(const void **table, int *version, char *what, size_t whatlen)
{
	/* int cudaGetDevice(int *device): *device = 0; return cudaSuccess */
	static const uint8_t get_device_0[] = {
		0xc7, 0x07, 0x00, 0x00, 0x00, 0x00, /* movl $0, (%rdi) */
		0x31, 0xc0,			    /* xorl %eax, %eax */
		0xc3,				    /* ret */
	};
	static struct search s;
	int (*get_version)(int *);
	struct link_map *lm = NULL;
	struct nccl_syms syms;
	char why[1024];
	void *lib;
	int code = 0, err;

	memset(&s, 0, sizeof(s));
	lib = nccl_load(&s);
	if (!lib) {
		snprintf(what, whatlen,
			 "NCCL's " LIB_NAME " was not found. Searched:%s\nName it with "
			 "NCCL_LIB=/path/to/" LIB_NAME " (or its directory), or install NCCL: the "
			 "CUDA toolkit's, Debian's libnccl2, or pip install nvidia-nccl-cu12 in the "
			 "Python environment this runs from",
			 s.text);
		return -1;
	}
	if (dlinfo(lib, RTLD_DI_LINKMAP, &lm) || !lm || !lm->l_name || !lm->l_name[0]) {
		snprintf(what, whatlen, "NCCL: where " LIB_NAME " was loaded from is not known");
		return -1;
	}
	get_version = (int (*)(int *))dlsym(lib, "ncclGetVersion");
	if (!get_version || get_version(&code) || !table_version(code)) {
		snprintf(what, whatlen,
			 "%s: NCCL %d.%d.%d, whose socket transport's table this does not know (it "
			 "knows NCCL 2.20 to 2.29; set NCCL_LIB to one of those)",
			 lm->l_name, code / 10000, code / 100 % 100, code % 100);
		return -1;
	}
	if (find_syms(lm->l_name, &syms, why, sizeof(why))) {
		snprintf(what, whatlen, "NCCL %d.%d.%d: %s", code / 10000, code / 100 % 100,
			 code % 100, why);
		return -1;
	}
#if defined(__x86_64__)
	if (syms.get_device_size < sizeof(get_device_0)) {
		snprintf(what, whatlen, "%s: cudaGetDevice is too short to rewrite (%llu bytes)",
			 lm->l_name, (unsigned long long)syms.get_device_size);
		return -1;
	}
	err = patch_code((void *)(lm->l_addr + syms.get_device), get_device_0,
			 sizeof(get_device_0));
	if (err) {
		snprintf(what, whatlen, "%s: cudaGetDevice could not be rewritten: %s", lm->l_name,
			 strerror(-err));
		return -1;
	}
#else
	(void)err;
	(void)get_device_0;
	snprintf(what, whatlen, "NCCL's socket transport without a GPU: x86-64 only (its CUDA "
				"device call is rewritten as x86-64 code)");
	return -1;
#endif
	*table = (const void *)(lm->l_addr + syms.net_socket);
	*version = table_version(code);
	snprintf(what, whatlen, "NCCL %d.%d.%d's socket transport (%s, net API v%d)",
		 code / 10000, code / 100 % 100, code % 100, lm->l_name, *version);
	return 0;
}
