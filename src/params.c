/* SPDX-License-Identifier: Apache-2.0 */
/*
 * harp's settings. params.def is expanded once into a table of descriptors (environment name,
 * type, default, accepted range or choices, doc, and the field's offset in struct harp_params),
 * and everything here walks that table: defaults, the strict parser, validation, the dump and
 * the README's Markdown table. Parsing is strict on purpose: an integer is plain decimal with
 * nothing around it, an enum is one of its choices spelled exactly, and an unknown HARP_*
 * variable is an error, so a typo fails init instead of silently running with a default.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <limits.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "internal.h"

extern char **environ;

enum param_type { PARAM_INT, PARAM_STR, PARAM_ENUM };

struct param_desc {
	const char *env;
	enum param_type type;
	size_t offset;	   /* of the field in struct harp_params */
	long long def_int; /* INT: value; ENUM: index of the default choice */
	const char *def_str;
	long long min, max; /* INT only */
	size_t max_len;	    /* STR only, without the terminating NUL */
	const char *choices; /* ENUM only: "a|b|c" */
	const char *doc;
};

static const struct param_desc params_table[] = {
#define HARP_PARAM_INT(field, name, def, lo, hi, d)                                                \
	{ .env = name, .type = PARAM_INT, .offset = offsetof(struct harp_params, field),           \
	  .def_int = def, .min = lo, .max = hi, .doc = d },
#define HARP_PARAM_STR(field, name, def, maxlen, d)                                                \
	{ .env = name, .type = PARAM_STR, .offset = offsetof(struct harp_params, field),           \
	  .def_str = def, .max_len = maxlen, .doc = d },
#define HARP_PARAM_ENUM(field, name, def, ch, d)                                                   \
	{ .env = name, .type = PARAM_ENUM, .offset = offsetof(struct harp_params, field),          \
	  .def_int = def, .choices = ch, .doc = d },
#include "params.def"
#undef HARP_PARAM_INT
#undef HARP_PARAM_STR
#undef HARP_PARAM_ENUM
};

#define PARAMS_ENV_PREFIX "HARP_"

static int *params_int_field(struct harp_params *p, const struct param_desc *d)
{
	return (int *)((char *)p + d->offset);
}

static const int *params_int_field_const(const struct harp_params *p, const struct param_desc *d)
{
	return (const int *)((const char *)p + d->offset);
}

static char *params_str_field(struct harp_params *p, const struct param_desc *d)
{
	return (char *)p + d->offset;
}

static const struct param_desc *params_find(const char *env_name)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		if (strcmp(params_table[i].env, env_name) == 0) {
			return &params_table[i];
		}
	}
	return NULL;
}

static void params_error(char *err, size_t errlen, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

static void params_error(char *err, size_t errlen, const char *fmt, ...)
{
	va_list ap;

	if (!err || errlen == 0) {
		return;
	}
	va_start(ap, fmt);
	vsnprintf(err, errlen, fmt, ap);
	va_end(ap);
}

/*
 * Finds choice number idx of "a|b|c"; returns its start and stores its length, or NULL when
 * there are not that many choices.
 */
static const char *params_enum_choice(const char *choices, long long idx, size_t *len)
{
	const char *s = choices;
	const char *bar;

	for (;;) {
		bar = strchr(s, '|');
		if (idx == 0) {
			*len = bar ? (size_t)(bar - s) : strlen(s);
			return s;
		}
		if (!bar) {
			return NULL;
		}
		s = bar + 1;
		idx--;
	}
}

/* Returns the index of value among the choices, or -1. Case-sensitive, whole words only. */
static int params_enum_index(const char *choices, const char *value)
{
	size_t vlen = strlen(value), len;
	const char *c;
	int idx;

	for (idx = 0; (c = params_enum_choice(choices, idx, &len)); idx++) {
		if (len == vlen && strncmp(c, value, len) == 0) {
			return idx;
		}
	}
	return -1;
}

/* Plain decimal: an optional '-', at least one digit, nothing else (no spaces, no suffix). */
static int params_parse_int(const char *s, long long *out)
{
	const char *digits = s[0] == '-' ? s + 1 : s;
	char *end;

	if (*digits < '0' || *digits > '9') {
		return -EINVAL;
	}
	errno = 0;
	*out = strtoll(s, &end, 10);
	if (*end != '\0') {
		return -EINVAL;
	}
	if (errno == ERANGE) {
		return -ERANGE;
	}
	return 0;
}

static int params_set_int(struct harp_params *p, const struct param_desc *d, const char *value,
			  char *err, size_t errlen)
{
	long long v;

	if (params_parse_int(value, &v) < 0 || v < d->min || v > d->max) {
		params_error(err, errlen,
			     "%s=%s is invalid: expected an integer in %lld..%lld (%s)", d->env,
			     value, d->min, d->max, d->doc);
		return -EINVAL;
	}
	*params_int_field(p, d) = (int)v;
	return 0;
}

static int params_set_str(struct harp_params *p, const struct param_desc *d, const char *value,
			  char *err, size_t errlen)
{
	size_t len = strlen(value);

	if (len > d->max_len) {
		/* the value may be huge: show its start, so the reason still fits */
		params_error(err, errlen,
			     "%s=%.24s%s is invalid: %zu characters, expected at most %zu (%s)",
			     d->env, value, len > 24 ? "..." : "", len, d->max_len, d->doc);
		return -EINVAL;
	}
	memcpy(params_str_field(p, d), value, len + 1);
	return 0;
}

static int params_set_enum(struct harp_params *p, const struct param_desc *d, const char *value,
			   char *err, size_t errlen)
{
	int idx = params_enum_index(d->choices, value);

	if (idx < 0) {
		params_error(err, errlen, "%s=%s is invalid: expected one of %s (%s)", d->env,
			     value, d->choices, d->doc);
		return -EINVAL;
	}
	*params_int_field(p, d) = idx;
	return 0;
}

void params_defaults(struct harp_params *p)
{
	const struct param_desc *d;
	size_t i;

	memset(p, 0, sizeof(*p));
	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		d = &params_table[i];
		if (d->type == PARAM_STR) {
			snprintf(params_str_field(p, d), d->max_len + 1, "%s", d->def_str);
		} else {
			*params_int_field(p, d) = (int)d->def_int;
		}
	}
}

/* HARP_QUEUES is text with a syntax: refused at once, as a number out of range is. */
static int params_set_queues(struct harp_params *p, const struct param_desc *d,
			     const char *value, char *err, size_t errlen)
{
	struct harp_params trial = *p;
	int ids[HARP_MAX_QUEUES], rc;

	rc = params_set_str(&trial, d, value, err, errlen);
	if (!rc) {
		rc = params_queue_ids(&trial, ids, err, errlen);
	}
	if (rc < 0) {
		return rc;
	}
	*p = trial;
	return 0;
}

int params_set(struct harp_params *p, const char *env_name, const char *value, char *err,
	       size_t errlen)
{
	const struct param_desc *d = params_find(env_name);

	if (!d) {
		params_error(err, errlen, "unknown setting %s; see harp-params --dump", env_name);
		return -ENOENT;
	}
	if (!value) {
		value = "";
	}
	switch (d->type) {
	case PARAM_INT:
		return params_set_int(p, d, value, err, errlen);
	case PARAM_STR:
		if (!strcmp(d->env, "HARP_QUEUES")) {
			return params_set_queues(p, d, value, err, errlen);
		}
		return params_set_str(p, d, value, err, errlen);
	case PARAM_ENUM:
		return params_set_enum(p, d, value, err, errlen);
	}
	return -EINVAL;
}

/* Any HARP_* variable that is not in the table is most likely a typo: refuse it. */
static int params_check_unknown_env(char *err, size_t errlen)
{
	const size_t prefix_len = strlen(PARAMS_ENV_PREFIX);
	char name[128];
	const char *eq;
	size_t len;
	char **e;

	for (e = environ; e && *e; e++) {
		if (strncmp(*e, PARAMS_ENV_PREFIX, prefix_len) != 0) {
			continue;
		}
		eq = strchr(*e, '=');
		len = eq ? (size_t)(eq - *e) : strlen(*e);
		if (len >= sizeof(name)) {
			len = sizeof(name) - 1;
		}
		memcpy(name, *e, len);
		name[len] = '\0';
		if (!params_find(name)) {
			params_error(err, errlen, "unknown setting %s; see harp-params --dump",
				     name);
			return -EINVAL;
		}
	}
	return 0;
}

/* Strips leading and trailing blanks in place. */
static char *params_trim(char *s)
{
	char *end;

	s += strspn(s, " \t");
	end = s + strlen(s);
	while (end > s && (end[-1] == ' ' || end[-1] == '\t' || end[-1] == '\n' ||
			   end[-1] == '\r')) {
		*--end = '\0';
	}
	return s;
}

/*
 * The node profile opened for reading: 0 with *out NULL where there is no file, which is no
 * profile, or a negative errno where it cannot be read or is not a regular file.
 */
static int conf_open(const char *path, FILE **out, char *err, size_t errlen)
{
	struct stat st;
	int fd, ret;
	FILE *f;

	*out = NULL;
	/* O_NONBLOCK: opening a FIFO would wait for a writer, and init with it */
	fd = open(path, O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK);
	if (fd < 0) {
		if (errno == ENOENT) {
			return 0;
		}
		ret = -errno;
		params_error(err, errlen, "the node profile %s (HARP_CONF) cannot be read: %s",
			     path, strerror(errno));
		return ret;
	}
	if (fstat(fd, &st) || !S_ISREG(st.st_mode)) {
		params_error(err, errlen, "the node profile %s (HARP_CONF) is not a regular file; "
			     "name a file of HARP_* lines, or set HARP_CONF= for none", path);
		close(fd);
		return -EINVAL;
	}
	f = fdopen(fd, "r");
	if (!f || fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK)) {
		ret = -errno;
		params_error(err, errlen, "the node profile %s (HARP_CONF) cannot be read: %s",
			     path, strerror(errno));
		if (f) {
			fclose(f);
		} else {
			close(fd);
		}
		return ret;
	}
	*out = f;
	return 0;
}

/* One line of the profile, newline and all: a setting, a blank line or a # comment. */
static int conf_line(struct harp_params *p, char *line, const char *path, int lineno,
		     char *err, size_t errlen)
{
	const struct param_desc *d;
	char *name, *value, *eq;
	char msg[384];
	int ret;

	name = params_trim(line);
	if (!name[0] || name[0] == '#') {
		return 0;
	}
	eq = strchr(name, '=');
	if (!eq) {
		params_error(err, errlen, "%s:%d: expected NAME=VALUE, found '%.64s'", path, lineno,
			     name);
		return -EINVAL;
	}
	*eq = '\0';
	name = params_trim(name);
	value = params_trim(eq + 1);
	d = params_find(name);
	if (!d || d->offset == offsetof(struct harp_params, conf)) {
		params_error(err, errlen, "%s:%d: %s is not a setting a profile can hold; see "
			     "harp-params --dump", path, lineno, name);
		return -EINVAL;
	}
	ret = params_set(p, d->env, value, msg, sizeof(msg));
	if (ret < 0) {
		params_error(err, errlen, "%s:%d: %s", path, lineno, msg);
	}
	return ret;
}

/*
 * The node profile: lines NAME=VALUE of the table's HARP_* names, blank lines and # comments.
 * No quoting and no expansion: the value is the rest of the line, blanks trimmed. A missing file
 * is no profile; one that cannot be read, or any line that is not a valid setting, is an error
 * naming the file and line, because a node that was prepared must not run with defaults instead.
 */
static int params_load_conf(struct harp_params *p, const char *path, char *err, size_t errlen)
{
	int lineno = 0, ret;
	char line[512];
	FILE *f;

	if (!path[0]) {
		return 0;
	}
	ret = conf_open(path, &f, err, errlen);
	if (ret || !f) {
		return ret;
	}
	while (fgets(line, sizeof(line), f)) {
		lineno++;
		if (!strchr(line, '\n') && !feof(f)) {
			params_error(err, errlen, "%s:%d: line longer than %zu characters", path,
				     lineno, sizeof(line) - 2);
			ret = -EINVAL;
			break;
		}
		ret = conf_line(p, line, path, lineno, err, errlen);
		if (ret < 0) {
			break;
		}
	}
	if (!ret && ferror(f)) {
		ret = -EIO;
		params_error(err, errlen, "the node profile %s could not be read to its end", path);
	}
	fclose(f);
	return ret;
}

int params_load_env(struct harp_params *p, char *err, size_t errlen)
{
	const char *value;
	size_t i;
	int ret;

	params_defaults(p);
	value = getenv("HARP_CONF");
	if (value) {
		ret = params_set(p, "HARP_CONF", value, err, errlen);
		if (ret < 0) {
			return ret;
		}
	}
	ret = params_load_conf(p, p->conf, err, errlen);
	if (ret < 0) {
		return ret;
	}
	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		value = getenv(params_table[i].env);
		if (!value) {
			continue;
		}
		ret = params_set(p, params_table[i].env, value, err, errlen);
		if (ret < 0) {
			return ret;
		}
	}
	return params_check_unknown_env(err, errlen);
}

/*
 * Fields may also come from harp_ctx_opts, past the parser, so each is checked against its own
 * range again before the cross-field rules.
 */
static int params_validate_fields(const struct harp_params *p, char *err, size_t errlen)
{
	const struct param_desc *d;
	const char *s;
	size_t i, len;
	int v;

	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		d = &params_table[i];
		if (d->type == PARAM_STR) {
			s = (const char *)p + d->offset;
			if (!memchr(s, '\0', d->max_len + 1)) {
				params_error(err, errlen,
					     "%s is invalid: expected at most %zu characters (%s)",
					     d->env, d->max_len, d->doc);
				return -EINVAL;
			}
			continue;
		}
		v = *params_int_field_const(p, d);
		if (d->type == PARAM_INT && (v < d->min || v > d->max)) {
			params_error(err, errlen,
				     "%s=%d is invalid: expected an integer in %lld..%lld (%s)",
				     d->env, v, d->min, d->max, d->doc);
			return -EINVAL;
		}
		if (d->type == PARAM_ENUM && (v < 0 || !params_enum_choice(d->choices, v, &len))) {
			params_error(err, errlen, "%s=#%d is invalid: expected one of %s (%s)",
				     d->env, v, d->choices, d->doc);
			return -EINVAL;
		}
	}
	return 0;
}

/* A number of HARP_QUEUES at *s, advancing s: digits only (at most 3), 0..max; else -1. */
static int queue_number(const char **s, int max)
{
	const char *start = *s;
	int v = 0, digits = 0;

	while (**s >= '0' && **s <= '9' && digits < 3) {
		v = v * 10 + (**s - '0');
		(*s)++;
		digits++;
	}
	if (!digits || v > max || (**s >= '0' && **s <= '9')) {
		*s = start; /* so that an error points at the number */
		return -1;
	}
	return v;
}

int params_queue_ids(const struct harp_params *p, int *ids, char *err, size_t errlen)
{
	const char *spec = p->queues, *s = spec;
	bool used[HARP_MAX_QUEUES] = { false };
	int n = 0, q, lo, hi;

	if (!strcmp(spec, "auto")) {
		return 0;
	}
	if (!strpbrk(spec, ",-")) {
		lo = queue_number(&s, HARP_MAX_QUEUES);
		if (lo < 1 || *s) {
			params_error(err, errlen,
				     "HARP_QUEUES=%s is invalid: expected auto, a count in 1..%d or a "
				     "list of queues 0..%d such as 2,3 or 4-7 (%s)",
				     spec, HARP_MAX_QUEUES, HARP_MAX_QUEUES - 1,
				     params_find("HARP_QUEUES")->doc);
			return -EINVAL;
		}
		for (q = 0; q < lo; q++) {
			ids[n++] = q;
		}
		return n;
	}
	for (;;) {
		lo = hi = queue_number(&s, HARP_MAX_QUEUES - 1);
		if (lo >= 0 && *s == '-') {
			s++;
			hi = queue_number(&s, HARP_MAX_QUEUES - 1);
		}
		if (lo < 0 || hi < lo || (*s && *s != ',')) {
			params_error(err, errlen,
				     "HARP_QUEUES=%s is invalid at '%s': expected queue numbers "
				     "0..%d and ranges LOW-HIGH, separated by commas (%s)",
				     spec, s, HARP_MAX_QUEUES - 1, params_find("HARP_QUEUES")->doc);
			return -EINVAL;
		}
		for (q = lo; q <= hi; q++) {
			if (used[q]) {
				params_error(err, errlen,
					     "HARP_QUEUES=%s is invalid: queue %d is named twice", spec,
					     q);
				return -EINVAL;
			}
			used[q] = true;
		}
		if (!*s++) {
			break;
		}
	}
	for (q = 0; q < HARP_MAX_QUEUES; q++) {
		if (used[q]) {
			ids[n++] = q;
		}
	}
	return n;
}

void queue_set_text(char *out, size_t len, uint64_t bits)
{
	size_t used = 0;
	int q, hi;

	out[0] = '\0';
	for (q = 0; q < 64 && used < len; q++) {
		if (!(bits & (1ull << q))) {
			continue;
		}
		for (hi = q; hi < 63 && (bits & (1ull << (hi + 1))); hi++) {
		}
		used += (size_t)(hi > q ? snprintf(out + used, len - used, "%s%d-%d",
						   used ? "," : "", q, hi)
					: snprintf(out + used, len - used, "%s%d", used ? "," : "", q));
		q = hi;
	}
	if (!used) {
		snprintf(out, len, "none");
	}
}

/* Where launchers say which rank on the node this is, and how many ranks the node runs. */
static const struct {
	const char *rank, *size, *who;
} local_rank_vars[] = {
	{ "LOCAL_RANK", "LOCAL_WORLD_SIZE", "torchrun" },
	{ "OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE", "Open MPI" },
	{ "MPI_LOCALRANKID", "MPI_LOCALNRANKS", "MPICH" },
	{ "SLURM_LOCALID", "SLURM_NTASKS_PER_NODE", "Slurm" },
};

static int env_count(const char *name, long *v, char *err, size_t errlen)
{
	const char *s = getenv(name);
	char *end;

	errno = 0;
	*v = strtol(s, &end, 10);
	if (errno || end == s || *end || *v < 0 || *v > 1000000) {
		params_error(err, errlen,
			     "%s=%s is invalid: expected a whole number (HARP_QUEUES=auto reads it "
			     "to share the NIC's queues among the node's ranks; or set HARP_QUEUES)",
			     name, s);
		return -EINVAL;
	}
	return 0;
}

/* This rank's place on the node: 1 with *rank of *size, 0 when no launcher says, or -EINVAL. */
static int local_rank(long *rank, long *size, const char **who, char *err, size_t errlen)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(local_rank_vars); i++) {
		if (!getenv(local_rank_vars[i].rank) || !getenv(local_rank_vars[i].size)) {
			continue;
		}
		if (env_count(local_rank_vars[i].rank, rank, err, errlen) ||
		    env_count(local_rank_vars[i].size, size, err, errlen)) {
			return -EINVAL;
		}
		if (*rank >= *size) {
			params_error(err, errlen,
				     "%s=%ld is invalid with %s=%ld: expected a rank below the count",
				     local_rank_vars[i].rank, *rank, local_rank_vars[i].size, *size);
			return -EINVAL;
		}
		*who = local_rank_vars[i].who;
		return 1;
	}
	return 0;
}

int params_pick_queues(const struct harp_params *p, int nic_queues, int *ids, int *take_free,
		       char *err, size_t errlen)
{
	long limit = p->port_count < HARP_AUTO_QUEUES_MAX ? p->port_count : HARP_AUTO_QUEUES_MAX;
	const char *who = NULL;
	long rank, size, stride, share;
	int n, q, rc;

	*take_free = 0;
	if (nic_queues > HARP_MAX_QUEUES) {
		nic_queues = HARP_MAX_QUEUES;
	}
	n = params_queue_ids(p, ids, err, errlen);
	if (n > 0 && nic_queues > 0 && ids[n - 1] >= nic_queues) {
		params_error(err, errlen,
			     "HARP_QUEUES=%s names queue %d, but %s has %d rx queues (0..%d; raise "
			     "them with ethtool -L, or set HARP_QUEUES=auto)",
			     p->queues, ids[n - 1], p->ifname, nic_queues, nic_queues - 1);
		return -EINVAL;
	}
	if (n) {
		return n; /* unknown queue count: the bind says whether the queue exists */
	}
	if (nic_queues < 1) {
		nic_queues = 1;
	}
	rc = local_rank(&rank, &size, &who, err, errlen);
	if (rc < 0) {
		return rc;
	}
	if (!rc || size == 1) {
		for (q = 0; q < nic_queues; q++) {
			ids[q] = q;
		}
		*take_free = (int)limit;
		return nic_queues;
	}
	/* Contiguous shares, the same split in every rank, so ranks never contend for a queue. */
	if (size > nic_queues) {
		params_error(err, errlen,
			     "HARP_QUEUES=auto: %s runs %ld ranks on this node but %s has %d rx "
			     "queues, and each harp process needs a queue of its own (raise them "
			     "with ethtool -L %s combined %ld, or set HARP_QUEUES per rank)",
			     who, size, p->ifname, nic_queues, p->ifname, size);
		return -EBUSY;
	}
	stride = nic_queues / size;
	share = stride < limit ? stride : limit;
	for (q = 0; q < share; q++) {
		ids[q] = (int)(rank * stride + q);
	}
	return (int)share;
}

int params_validate(const struct harp_params *p, char *err, size_t errlen)
{
	int ids[HARP_MAX_QUEUES];
	const struct param_desc *d;
	int ret, nq;

	ret = params_validate_fields(p, err, errlen);
	if (ret < 0) {
		return ret;
	}
	if (p->frame_size != 2048 && p->frame_size != 4096) {
		params_error(err, errlen,
			     "HARP_FRAME_SIZE=%d is invalid: expected 2048 or 4096 (%s)",
			     p->frame_size, params_find("HARP_FRAME_SIZE")->doc);
		return -EINVAL;
	}
	if (p->mtu && p->mtu < HARP_MTU_MIN) {
		params_error(err, errlen,
			     "HARP_MTU=%d is invalid: expected 0 or an IP MTU in %d..%lld (%s)",
			     p->mtu, HARP_MTU_MIN, params_find("HARP_MTU")->max,
			     params_find("HARP_MTU")->doc);
		return -EINVAL;
	}
	if (p->frame_count & (p->frame_count - 1)) {
		d = params_find("HARP_FRAME_COUNT");
		params_error(err, errlen,
			     "HARP_FRAME_COUNT=%d is invalid: expected a power of two in "
			     "%lld..%lld (%s)",
			     p->frame_count, d->min, d->max, d->doc);
		return -EINVAL;
	}
	nq = params_queue_ids(p, ids, err, errlen);
	if (nq < 0) {
		return nq;
	}
	if (nq > p->port_count) {
		params_error(err, errlen,
			     "HARP_QUEUES=%s is invalid with HARP_PORT_COUNT=%d: expected at most "
			     "one queue per port (%d queues named)",
			     p->queues, p->port_count, nq);
		return -EINVAL;
	}
	if ((long)p->port_base + p->port_count - 1 > 65535) {
		params_error(err, errlen,
			     "HARP_PORT_BASE=%d with HARP_PORT_COUNT=%d is invalid: expected the "
			     "port range to end at or below 65535",
			     p->port_base, p->port_count);
		return -EINVAL;
	}
	return 0;
}

/* Writes a parameter's current value as text (for the dump). */
static void params_format_value(const struct harp_params *p, const struct param_desc *d,
				char *buf, size_t len)
{
	const char *choice;
	size_t clen;
	int v;

	if (d->type == PARAM_STR) {
		snprintf(buf, len, "%.*s", (int)d->max_len, (const char *)p + d->offset);
		return;
	}
	v = *params_int_field_const(p, d);
	if (d->type == PARAM_INT) {
		snprintf(buf, len, "%d", v);
		return;
	}
	choice = v >= 0 ? params_enum_choice(d->choices, v, &clen) : NULL;
	if (choice) {
		snprintf(buf, len, "%.*s", (int)clen, choice);
	} else {
		snprintf(buf, len, "#%d", v);
	}
}

/* Writes what a parameter accepts, in words; sep separates enum choices. */
static void params_format_accepted(const struct param_desc *d, const char *sep, char *buf,
				   size_t len)
{
	const char *choice;
	size_t clen, used = 0;
	int idx, n;

	switch (d->type) {
	case PARAM_INT:
		snprintf(buf, len, "%lld..%lld", d->min, d->max);
		return;
	case PARAM_STR:
		snprintf(buf, len, "text, at most %zu chars", d->max_len);
		return;
	case PARAM_ENUM:
		buf[0] = '\0';
		for (idx = 0; (choice = params_enum_choice(d->choices, idx, &clen)); idx++) {
			n = snprintf(buf + used, len - used, "%s%.*s", idx ? sep : "", (int)clen,
				     choice);
			if (n < 0 || (size_t)n >= len - used) {
				return;
			}
			used += (size_t)n;
		}
		return;
	}
}

void params_dump(const struct harp_params *p, FILE *out)
{
	struct harp_params defaults;
	const struct param_desc *d;
	char value[64], def[64], accepted[96], line[160];
	size_t i;

	params_defaults(&defaults);
	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		d = &params_table[i];
		params_format_value(p, d, value, sizeof(value));
		params_format_value(&defaults, d, def, sizeof(def));
		params_format_accepted(d, "|", accepted, sizeof(accepted));
		snprintf(line, sizeof(line), "%s=%s", d->env, value);
		fprintf(out, "%-32s %-24s default %-8s %s\n", line, accepted,
			def[0] ? def : "\"\"", d->doc);
	}
}

/* Markdown cells: a '|' would split the cell, so it is escaped. */
static void params_put_cell(const char *s, FILE *out)
{
	for (; *s; s++) {
		if (*s == '|') {
			fputc('\\', out);
		}
		fputc(*s, out);
	}
}

void params_dump_markdown(FILE *out)
{
	struct harp_params defaults;
	const struct param_desc *d;
	char def[64], accepted[96];
	size_t i;

	params_defaults(&defaults);
	fprintf(out, "| Variable | Default | Accepted | Meaning |\n");
	fprintf(out, "|---|---|---|---|\n");
	for (i = 0; i < ARRAY_SIZE(params_table); i++) {
		d = &params_table[i];
		params_format_value(&defaults, d, def, sizeof(def));
		params_format_accepted(d, "`, `", accepted, sizeof(accepted));
		fprintf(out, "| `%s` | ", d->env);
		if (def[0]) {
			fprintf(out, "`%s`", def);
		} else {
			fprintf(out, "(none)");
		}
		fprintf(out, " | ");
		if (d->type == PARAM_ENUM) {
			fputc('`', out);
			params_put_cell(accepted, out);
			fputc('`', out);
		} else {
			params_put_cell(accepted, out);
		}
		fprintf(out, " | ");
		params_put_cell(d->doc, out);
		fprintf(out, " |\n");
	}
}
