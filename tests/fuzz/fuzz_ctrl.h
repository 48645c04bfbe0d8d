/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What fuzz_ctrl and its seed generator agree on: the first input byte picks the message the
 * rest is checked as, and the listener's nonce a HELLO_REQ must carry to get past that check.
 */
#ifndef HARP_FUZZ_CTRL_H
#define HARP_FUZZ_CTRL_H

enum fuzz_ctrl_kind {
	FUZZ_CTRL_HELLO_REQ, /* a hello, checked as the listener checks the connector's */
	FUZZ_CTRL_HELLO_OK,  /* a hello, checked as the connector checks the listener's answer */
	FUZZ_CTRL_CHAN,	     /* a running connection's control message */
	FUZZ_CTRL_AGENT,     /* a node agent message */
	FUZZ_CTRL_KINDS,
};

#define FUZZ_CTRL_NONCE 0x0123456789abcdefull

#endif
