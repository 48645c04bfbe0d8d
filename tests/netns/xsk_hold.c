// SPDX-License-Identifier: Apache-2.0
/*
 * xsk-hold IFNAME QUEUE MS: binds a copy-mode AF_XDP socket to QUEUE of IFNAME, prints "held"
 * once the kernel has accepted the bind, keeps the queue MS milliseconds and exits. It stands
 * for any other AF_XDP user of the queue (or a harp process the kernel has not finished
 * freeing), so queue_busy.sh can check how harp waits for a queue and when it gives up.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>
#include <linux/if_xdp.h>
#include <xdp/xsk.h>

#define HOLD_FRAMES 64
#define HOLD_FRAME_SIZE 4096

int main(int argc, char **argv)
{
	struct xsk_socket_config cfg = {
		.rx_size = HOLD_FRAMES,
		.tx_size = HOLD_FRAMES,
		.libxdp_flags = XSK_LIBXDP_FLAGS__INHIBIT_PROG_LOAD,
		.bind_flags = XDP_COPY,
	};
	struct xsk_ring_prod fill, tx;
	struct xsk_ring_cons comp, rx;
	struct xsk_socket *xsk;
	struct xsk_umem *umem;
	size_t len = (size_t)HOLD_FRAMES * HOLD_FRAME_SIZE;
	char *end;
	long queue, ms;
	void *area;
	int err;

	if (argc != 4) {
		fprintf(stderr, "usage: xsk-hold IFNAME QUEUE MS\n");
		return 2;
	}
	queue = strtol(argv[2], &end, 10);
	if (*end || queue < 0) {
		fprintf(stderr, "xsk-hold: bad QUEUE '%s'\n", argv[2]);
		return 2;
	}
	ms = strtol(argv[3], &end, 10);
	if (*end || ms < 0 || ms > 600000) {
		fprintf(stderr, "xsk-hold: bad MS '%s' (0 to 600000)\n", argv[3]);
		return 2;
	}
	area = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (area == MAP_FAILED) {
		perror("xsk-hold: mmap");
		return 1;
	}
	err = xsk_umem__create(&umem, area, len, &fill, &comp, NULL);
	if (err) {
		fprintf(stderr, "xsk-hold: UMEM: %s\n", strerror(-err));
		return 1;
	}
	err = xsk_socket__create(&xsk, argv[1], (uint32_t)queue, umem, &rx, &tx, &cfg);
	if (err) {
		fprintf(stderr, "xsk-hold: bind of %s queue %ld: %s\n", argv[1], queue, strerror(-err));
		return 1;
	}
	printf("held\n");
	fflush(stdout);
	usleep((useconds_t)ms * 1000);
	xsk_socket__delete(xsk);
	xsk_umem__delete(umem);
	printf("released\n");
	return 0;
}
