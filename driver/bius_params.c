// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: the parameters of a device, struct bius_device_params: what
 * CREATE_DEVICE accepts, its defaults, and what RECOVER_DEVICE must match.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/ctype.h>
#include <linux/kernel.h>
#include <linux/log2.h>
#include <linux/sizes.h>
#include <linux/stddef.h>
#include <linux/string.h>

#include "bius_drv.h"
#include "bius_compat.h"

static bool bius_name_valid(const char *name)
{
	size_t len = strnlen(name, BIUS_NAME_LEN);
	size_t i;

	if (len == BIUS_NAME_LEN)
		return false;
	for (i = 0; i < len; i++) {
		char c = name[i];

		if (!isalnum(c) && c != '_' && c != '-')
			return false;
	}
	return true;
}

static bool bius_reserved_zero(const struct bius_device_params *p)
{
	size_t i;

	if (p->reserved0)
		return false;
	for (i = 0; i < ARRAY_SIZE(p->reserved); i++)
		if (p->reserved[i])
			return false;
	return true;
}

static const char *bius_block_sizes_problem(const struct bius_device_params *p)
{
	u32 lbs = p->logical_block_size, pbs = p->physical_block_size;

	if (!is_power_of_2(lbs) || lbs < 512 || lbs > 4096)
		return "logical_block_size must be a power of two in 512..4096";
	if (pbs && (!is_power_of_2(pbs) || pbs < lbs || pbs > SZ_64K))
		return "physical_block_size must be 0 or a power of two in logical_block_size..65536";
	if (!p->size)
		return "size is 0";
	if (p->size & (lbs - 1))
		return "size is not a multiple of logical_block_size";
	if (p->size > BIUS_MAX_SIZE)
		return "size is larger than BIUS_MAX_SIZE";
	return NULL;
}

static const char *bius_queues_problem(const struct bius_device_params *p)
{
	u32 max_io = p->max_io_bytes;

	if (!p->nr_hw_queues || p->nr_hw_queues > BIUS_MAX_HW_QUEUES)
		return "nr_hw_queues must be in 1..BIUS_MAX_HW_QUEUES";
	if (p->nr_poll_queues >= p->nr_hw_queues)
		return "nr_poll_queues must be below nr_hw_queues (a queue is left for the default map)";
	if (!p->queue_depth || p->queue_depth > BIUS_MAX_QUEUE_DEPTH)
		return "queue_depth must be in 1..BIUS_MAX_QUEUE_DEPTH";
	if (max_io && (max_io < p->logical_block_size || max_io < PAGE_SIZE ||
		       max_io > BIUS_MAX_IO_BYTES))
		return "max_io_bytes must be 0 or in max(logical_block_size, page size)..BIUS_MAX_IO_BYTES";
	if (max_io & (p->logical_block_size - 1))
		return "max_io_bytes is not a multiple of logical_block_size";
	return NULL;
}

static const char *bius_transfer_problem(const struct bius_device_params *p)
{
	u32 max_io = p->max_io_bytes ?: BIUS_DEFAULT_MAX_IO_BYTES;

	switch (p->transfer_mode) {
	case BIUS_TRANSFER_COPY:
	case BIUS_TRANSFER_MAP:
		if (p->map_threshold)
			return "map_threshold is set without BIUS_TRANSFER_SELECTIVE";
		return NULL;
	case BIUS_TRANSFER_SELECTIVE:
		if (p->map_threshold > max_io)
			return "map_threshold is larger than max_io_bytes";
		return NULL;
	default:
		return "unknown transfer_mode";
	}
}

static const char *bius_params_problem(const struct bius_device_params *p)
{
	const char *why;

	if (p->abi_version != BIUS_ABI_VERSION)
		return "abi_version does not match BIUS_ABI_VERSION";
	why = bius_block_sizes_problem(p);
	if (why)
		return why;
	why = bius_queues_problem(p);
	if (why)
		return why;
	if (p->features & ~BIUS_FEATURES_ALL)
		return "unknown feature bits";
	if (p->features & BIUS_FEATURE_ZONED) {
		why = bius_zoned_problem(p);
		if (why)
			return why;
	} else if (memchr_inv(&p->zoned, 0, sizeof(p->zoned))) {
		return "zoned parameters are set without BIUS_FEATURE_ZONED";
	} else if (p->features & BIUS_FEATURE_ZONE_APPEND_EMULATED) {
		return "BIUS_FEATURE_ZONE_APPEND_EMULATED is set without BIUS_FEATURE_ZONED";
	}
	why = bius_transfer_problem(p);
	if (why)
		return why;
	if (p->timeout_ms > BIUS_MAX_TIMEOUT_MS)
		return "timeout_ms is larger than BIUS_MAX_TIMEOUT_MS";
	if (p->poll_usecs > BIUS_MAX_POLL_USECS)
		return "poll_usecs is larger than BIUS_MAX_POLL_USECS";
	if (p->recover_timeout_ms > BIUS_MAX_RECOVER_TIMEOUT_MS)
		return "recover_timeout_ms is larger than BIUS_MAX_RECOVER_TIMEOUT_MS";
	if (!bius_reserved_zero(p))
		return "reserved fields are not zero";
	if (!bius_name_valid(p->name))
		return "name is unterminated or has characters outside [A-Za-z0-9_-]";
	return NULL;
}

/*
 * Validate CREATE_DEVICE parameters and apply the defaults: -EINVAL, or
 * -EOPNOTSUPP for valid parameters this kernel cannot serve.
 */
int bius_params_check(struct bius_device_params *p)
{
	const char *why = bius_params_problem(p);

	if (why) {
		pr_warn("CREATE_DEVICE refused: %s\n", why);
		return -EINVAL;
	}
	if ((p->features & BIUS_FEATURE_ZONE_APPEND_EMULATED) &&
	    !BIUS_HAVE_ZONE_APPEND_EMULATION) {
		pr_warn("CREATE_DEVICE refused: BIUS_FEATURE_ZONE_APPEND_EMULATED needs Linux 6.10 or newer (zone write plugging)\n");
		return -EOPNOTSUPP;
	}
	p->dev_id = 0;
	if (!p->physical_block_size)
		p->physical_block_size = p->logical_block_size;
	if (!p->max_io_bytes)
		p->max_io_bytes = BIUS_DEFAULT_MAX_IO_BYTES;
	if (!p->timeout_ms)
		p->timeout_ms = BIUS_DEFAULT_TIMEOUT_MS;
	if (p->transfer_mode == BIUS_TRANSFER_SELECTIVE && !p->map_threshold)
		p->map_threshold = min(BIUS_DEFAULT_MAP_THRESHOLD,
				       p->max_io_bytes);
	bius_zoned_normalize(p);
	return 0;
}

/* Fields of struct bius_device_params that RECOVER_DEVICE must match. */
static const struct {
	const char *name;
	size_t offset;
	size_t size;
} bius_recover_fields[] = {
#define BIUS_PARAM(f) { #f, offsetof(struct bius_device_params, f), \
			sizeof_field(struct bius_device_params, f) }
	BIUS_PARAM(size),
	BIUS_PARAM(logical_block_size),
	BIUS_PARAM(physical_block_size),
	BIUS_PARAM(nr_hw_queues),
	BIUS_PARAM(nr_poll_queues),
	BIUS_PARAM(queue_depth),
	BIUS_PARAM(max_io_bytes),
	BIUS_PARAM(timeout_ms),
	BIUS_PARAM(features),
	BIUS_PARAM(transfer_mode),
	BIUS_PARAM(map_threshold),
	BIUS_PARAM(zoned),
	BIUS_PARAM(recover_timeout_ms),
#undef BIUS_PARAM
};

/*
 * RECOVER_DEVICE: the first field of @p (checked, defaults applied) that
 * does not describe the device of @dev (its parameters), or NULL.
 */
const char *bius_params_mismatch(const struct bius_device_params *dev,
				 const struct bius_device_params *p)
{
	const char *have = (const char *)dev, *want = (const char *)p;
	size_t i;

	for (i = 0; i < ARRAY_SIZE(bius_recover_fields); i++) {
		size_t off = bius_recover_fields[i].offset;

		if (memcmp(have + off, want + off, bius_recover_fields[i].size))
			return bius_recover_fields[i].name;
	}
	if (p->name[0] && strncmp(p->name, dev->name, BIUS_NAME_LEN))
		return "name";
	return NULL;
}
