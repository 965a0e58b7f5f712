// SPDX-License-Identifier: GPL-2.0
/*
 * BIUS: map mode.  A connected file may be mmap()ed once as the queue's data
 * window: one slot per tag, see "Data window" in bius.h.  For a mapped
 * request, read() inserts the pages of the I/O buffer into the request's
 * slot as PFN mappings (no page references taken: the request owns the
 * pages until it ends, and its range is always unmapped, TLBs flushed,
 * before it ends; see bius_unmap_range()).
 * Slot pages the data does not cover whole get a spare page from the
 * window's pool, zeroed, with the data copied in (writes) or out (reads).
 *
 * The data is laid out in the slot as one piece, or, where a buffer
 * segment would not line up with the slot's pages, as several: a new
 * piece starts at the segment's own offset in a page, so that the whole
 * buffer pages after it are mapped rather than copied (bius_walk_chunks).
 * The daemon gets the pieces as a segment list.
 *
 * The PTEs of a request (and of the sink page behind an aborted one) are set
 * in one page-table walk (apply_to_page_range) from the list of its slot
 * pages' frames, not page by page with
 * vmf_insert_pfn_prot(): that looks up the PAT memory type of every frame,
 * which the pages of an I/O buffer, ordinary RAM, do not need.
 *
 * A request's PTEs are set with the mmap_lock of the mapping's mm held for
 * reading (tried, never waited for: see bius_map_insert()), after checking
 * that the window's VMA is still in the tree.  They are zapped without it:
 * each window is a range of its file's mapping of its own (bius_mmap() sets
 * the VMA's offset), so unmapping zaps exactly the request's pages as
 * truncate zaps a file's, under the mapping's i_mmap_rwsem, and the TLB
 * flush covers only that range (bius_unmap_range()).  Idle slot pages map
 * nothing until they are read: then the fault handler maps the zero page,
 * read-only; writing an idle page or a read-only mapped write payload
 * raises SIGBUS.  The range of a request that times out or dies while the
 * daemon may still be working on it faults in the window's sink page
 * instead, so that the daemon never faults on it.  The next request of a
 * tag whose slot has such stale PTEs (zero or sink page) zaps the slot
 * first.
 *
 * A window is freed with its last reference: the queue's (until the
 * connection is lost or the device freed), the mapping's (until munmap()
 * or exit, which zap its PTEs and flush the TLBs first) and one per
 * request mapped in it.
 */
#define pr_fmt(fmt) KBUILD_MODNAME ": " fmt

#include <linux/bitmap.h>
#include <linux/blk-mq.h>
#include <linux/fs.h>
#include <linux/highmem.h>
#include <linux/mm.h>
#include <linux/mm_inline.h>
#include <linux/mmap_lock.h>
#include <linux/refcount.h>
#include <linux/sched/mm.h>
#include <linux/slab.h>

#include "bius_drv.h"
#include "bius_compat.h"

/*
 * The data window of one queue's connection.  The one of a lost daemon is
 * retired (still mapped in its process, no longer used for new requests)
 * when the device is held for recovery.
 */
struct bius_window {
	refcount_t ref;			/* queue, mapping, mapped requests */
	atomic_t nr_vmas;		/* mapping it; 0: unmapped, flushed */
	struct mm_struct *mm;		/* of the mapping; mmgrab()ed */
	unsigned long start;		/* address of the mapping */
	struct address_space *mapping;	/* of the mapped file; its host */
					/* inode held */
	pgoff_t pgoff;			/* the window's offset in it */
	u32 slot_bytes;
	u32 nr_spare;			/* BIUS_MAP_SPARE_PAGES per tag */
	pgprot_t prot_read;		/* write payloads, zero page: read-only */
	pgprot_t prot_write;		/* read requests: writable */
	struct page *sink;		/* behind aborted requests' ranges */
	unsigned long *stale;		/* per tag: slot maps the zero or the */
					/* sink page somewhere */
	unsigned long *sunk;		/* per tag: faults map the sink page */
	unsigned long *pfns;		/* frames of the request being mapped */
					/* (read() side, under xfer_lock) */
	spinlock_t spare_lock;		/* guards free, nr_free */
	u16 *free;			/* indexes of the free spare pages */
	u32 nr_free;
	struct page *spare[];		/* the pool, nr_spare pages */
};

u32 bius_map_slot_bytes(const struct bius_device_params *p)
{
	if (p->transfer_mode == BIUS_TRANSFER_COPY)
		return 0;
	return BIUS_MAP_SLOT_BYTES(p->max_io_bytes, PAGE_SIZE);
}

/*
 * A fault on a window page that maps nothing (mmap_lock held): in the
 * range of an aborted request the sink page; else a read maps the zero
 * page, read-only, and marks the slot stale; a write raises SIGBUS.
 */
static vm_fault_t bius_vm_fault(struct vm_fault *vmf)
{
	struct bius_window *win = vmf->vma->vm_private_data;
	u32 tag = (vmf->address - vmf->vma->vm_start) / win->slot_bytes;

	if (test_bit(tag, win->sunk))
		return vmf_insert_pfn_prot(vmf->vma, vmf->address,
					   page_to_pfn(win->sink),
					   win->prot_write);
	if (vmf->flags & FAULT_FLAG_WRITE)
		return VM_FAULT_SIGBUS;
	set_bit(tag, win->stale);
	return vmf_insert_pfn_prot(vmf->vma, vmf->address,
				   page_to_pfn(ZERO_PAGE(vmf->address)),
				   win->prot_read);
}

/* A write to a read-only page: a write payload or the zero page. */
static vm_fault_t bius_vm_refuse_write(struct vm_fault *vmf)
{
	return VM_FAULT_SIGBUS;
}

static int bius_vm_refuse_split(struct vm_area_struct *vma, unsigned long addr)
{
	return -EINVAL;
}

static int bius_vm_refuse_mremap(struct vm_area_struct *vma)
{
	return -EINVAL;
}

static int bius_vm_refuse_mprotect(struct vm_area_struct *vma,
				   unsigned long start, unsigned long end,
				   unsigned long newflags)
{
	return -EACCES;
}

static void bius_window_free(struct bius_window *win)
{
	u32 i;

	for (i = 0; i < win->nr_spare; i++)
		if (win->spare[i])
			__free_page(win->spare[i]);
	if (win->sink)
		__free_page(win->sink);
	bitmap_free(win->stale);
	bitmap_free(win->sunk);
	kvfree(win->pfns);
	kvfree(win->free);
	if (win->mm)
		mmdrop(win->mm);
	if (win->mapping)
		iput(win->mapping->host);
	kvfree(win);
}

/* Drop a reference: the queue's, the mapping's or a mapped request's. */
void bius_window_put(struct bius_window *win)
{
	if (win && refcount_dec_and_test(&win->ref))
		bius_window_free(win);
}

/* A copy of the mapping (a refused mremap() makes one, then unmaps it). */
static void bius_vm_open(struct vm_area_struct *vma)
{
	struct bius_window *win = vma->vm_private_data;

	atomic_inc(&win->nr_vmas);
	refcount_inc(&win->ref);
}

/* A mapping is gone: its PTEs are zapped and the TLBs flushed by now. */
static void bius_vm_close(struct vm_area_struct *vma)
{
	struct bius_window *win = vma->vm_private_data;

	atomic_dec(&win->nr_vmas);
	bius_window_put(win);
}

static const struct vm_operations_struct bius_vm_ops = {
	.open		= bius_vm_open,
	.close		= bius_vm_close,
	.fault		= bius_vm_fault,
	.pfn_mkwrite	= bius_vm_refuse_write,
	.may_split	= bius_vm_refuse_split,
	.mremap		= bius_vm_refuse_mremap,
	.mprotect	= bius_vm_refuse_mprotect,
};

static struct bius_window *bius_window_alloc(struct bius_device *dev)
{
	u32 nr_spare = dev->params.queue_depth * BIUS_MAP_SPARE_PAGES;
	struct bius_window *win;
	u32 i;

	win = kvzalloc(struct_size(win, spare, nr_spare), GFP_KERNEL);
	if (!win)
		return NULL;
	refcount_set(&win->ref, 1);
	atomic_set(&win->nr_vmas, 1);
	win->nr_spare = nr_spare;
	win->slot_bytes = dev->map_slot_bytes;
	spin_lock_init(&win->spare_lock);
	win->prot_read = vm_get_page_prot(VM_READ | VM_SHARED);
	win->prot_write = vm_get_page_prot(VM_READ | VM_WRITE | VM_SHARED);
	win->free = kvmalloc_array(nr_spare, sizeof(*win->free), GFP_KERNEL);
	if (!win->free)
		goto fail;
	for (i = 0; i < nr_spare; i++) {
		win->spare[i] = alloc_page(GFP_KERNEL);
		if (!win->spare[i])
			goto fail;
		win->free[win->nr_free++] = i;
	}
	win->sink = alloc_page(GFP_KERNEL | __GFP_ZERO);
	win->stale = bitmap_zalloc(dev->params.queue_depth, GFP_KERNEL);
	win->sunk = bitmap_zalloc(dev->params.queue_depth, GFP_KERNEL);
	win->pfns = kvmalloc_array(win->slot_bytes >> PAGE_SHIFT,
				   sizeof(*win->pfns), GFP_KERNEL);
	if (!win->sink || !win->stale || !win->sunk || !win->pfns)
		goto fail;
	return win;

fail:
	bius_window_free(win);
	return NULL;
}

/*
 * Make @win the window of @q, connected to @conn, unless @conn is stale or
 * @q has one: under q->lock, as bius_window_retire() takes it off.
 */
static int bius_window_publish(struct bius_queue *q, struct bius_conn *conn,
			       struct bius_window *win)
{
	int ret = 0;

	spin_lock_irq(&q->lock);
	if (READ_ONCE(q->conn) != conn) {
		ret = -ENODEV;
	} else if (q->win) {
		ret = -EBUSY;
	} else {
		refcount_inc(&win->ref);	/* the queue's */
		/* pairs with smp_load_acquire() in bius_map_rq() */
		smp_store_release(&q->win, win);
	}
	spin_unlock_irq(&q->lock);
	return ret;
}

/*
 * The next window's offset in the mapping of /dev/bius (all its files
 * share their inode's): each window has a range of its own, never reused,
 * for bius_zap() to name.
 */
static atomic_long_t bius_window_pgoff = ATOMIC_LONG_INIT(0);

/* file_operations.mmap of /dev/bius: the connected queue's data window. */
int bius_mmap(struct file *file, struct vm_area_struct *vma)
{
	struct bius_conn *conn = file->private_data;
	struct bius_queue *q = bius_conn_queue(conn);
	const unsigned long need = VM_SHARED | VM_READ | VM_WRITE;
	struct bius_window *win;
	struct bius_device *dev;
	int ret;

	if (!q)
		return -ENOTCONN;
	if (READ_ONCE(q->conn) != conn)
		return -ENODEV;
	dev = q->dev;
	if (!dev->map_slot_bytes || vma->vm_pgoff ||
	    (vma->vm_flags & need) != need ||
	    vma->vm_end - vma->vm_start != bius_map_window_bytes(dev))
		return -EINVAL;
	if (READ_ONCE(q->win))
		return -EBUSY;

	win = bius_window_alloc(dev);
	if (!win)
		return -ENOMEM;
	win->start = vma->vm_start;
	win->mm = vma->vm_mm;
	mmgrab(win->mm);
	win->mapping = file->f_mapping;
	ihold(win->mapping->host);
	win->pgoff = atomic_long_fetch_add(vma_pages(vma), &bius_window_pgoff);
	ret = bius_window_publish(q, conn, win);
	if (ret) {
		bius_window_free(win);
		return ret;
	}

	bius_vma_set_flags(vma, VM_IO | VM_PFNMAP | VM_DONTEXPAND |
			   VM_DONTDUMP | VM_DONTCOPY);
	vma->vm_ops = &bius_vm_ops;
	vma->vm_private_data = win;
	/* before the VMA goes into the mapping's tree */
	vma->vm_pgoff = win->pgoff;
	return 0;
}

/*
 * The device is held for recovery, q->conn already cleared (dev->lock and
 * q->xfer_lock held, so no read() maps a request): the lost connection's
 * window stays with its process, and its requests' ranges with it, until
 * it is unmapped; the queue's next connection maps a new one.
 */
void bius_window_retire(struct bius_queue *q)
{
	struct bius_window *win;

	spin_lock_irq(&q->lock);
	win = q->win;
	WRITE_ONCE(q->win, NULL);
	spin_unlock_irq(&q->lock);
	bius_window_put(win);
}

/*
 * The window's VMA if it is still mapped (mmap_lock held): a VMA found here
 * cannot be unmapped until the lock is dropped.
 */
static struct vm_area_struct *bius_window_vma(struct bius_window *win)
{
	struct vm_area_struct *vma = find_vma(win->mm, win->start);

	if (!vma || vma->vm_start != win->start ||
	    vma->vm_ops != &bius_vm_ops || vma->vm_private_data != win)
		return NULL;
	return vma;
}

/*
 * One piece of a request's data: at most a page of it, inside one page of
 * the buffer and one page of the slot.
 */
struct bius_chunk {
	struct page *page;	/* of the buffer */
	u32 page_off;
	u32 vpage;		/* page of the slot */
	u32 vpage_off;
	u32 len;
	bool new_seg;		/* first chunk of a segment of the layout */
};

/* A chunk mapped directly: a whole buffer page at a whole slot page. */
static bool bius_chunk_direct(const struct bius_chunk *c)
{
	return c->len == PAGE_SIZE;
}

typedef bool (*bius_chunk_fn)(struct bius_cmd *cmd,
			      const struct bius_chunk *c, void *arg);

/*
 * Does the buffer segment @bv (within one page) start a new segment of the
 * layout, the data so far (@pos bytes in @nr_segs segments) ending at slot
 * offset @off?  Only if it ends its buffer page but would not start at its
 * own offset in a slot page: then the whole buffer pages that may follow it
 * line up with slot pages only if it starts afresh.  Segments start at
 * 512-byte boundaries of the data, a ZONE_APPEND is never split, and there
 * are at most BIUS_MAP_MAX_SEGMENTS.
 */
static bool bius_layout_breaks(const struct bius_cmd *cmd,
			       const struct bio_vec *bv, u32 off, u32 pos,
			       u32 nr_segs)
{
	return offset_in_page(off) != bv->bv_offset &&
	       bv->bv_offset + bv->bv_len == PAGE_SIZE &&
	       IS_ALIGNED(pos, SECTOR_SIZE) &&
	       cmd->op != BIUS_OP_ZONE_APPEND &&
	       nr_segs < BIUS_MAP_MAX_SEGMENTS;
}

/*
 * Call @fn for each chunk of @rq's data, in order, as laid out in the slot:
 * the first segment starts at the data's offset in its first page, and
 * each buffer segment that bius_layout_breaks() starts a new one at its
 * own offset in the next free slot page.  Stop (false) when @fn does.
 */
static bool bius_walk_chunks(struct request *rq, bius_chunk_fn fn, void *arg)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct req_iterator iter;
	struct bio_vec bv;
	struct bius_chunk c;
	u32 off = 0, pos = 0, nr_segs = 0, done;

	rq_for_each_segment(bv, rq, iter) {
		c.new_seg = !nr_segs ||
			    bius_layout_breaks(cmd, &bv, off, pos, nr_segs);
		if (c.new_seg) {
			off = ALIGN(off, PAGE_SIZE) + bv.bv_offset;
			nr_segs++;
		}
		for (done = 0; done < bv.bv_len; done += c.len) {
			c.page = bv.bv_page;
			c.page_off = bv.bv_offset + done;
			c.vpage = off >> PAGE_SHIFT;
			c.vpage_off = offset_in_page(off);
			c.len = min3(bv.bv_len - done,
				     (u32)PAGE_SIZE - c.vpage_off,
				     (u32)PAGE_SIZE - c.page_off);
			off += c.len;
			if (!fn(cmd, &c, arg))
				return false;
			c.new_seg = false;
		}
		pos += bv.bv_len;
	}
	return true;
}

/* The spare page index (0..) of slot page @vpage, or -1. */
static int bius_spare_of(const struct bius_cmd *cmd, u32 vpage)
{
	int i;

	for (i = 0; i < cmd->nr_spare; i++)
		if (cmd->spare_vpage[i] == vpage)
			return i;
	return -1;
}

/*
 * Plan: record the segments and the slot pages mapped, and give the slot
 * pages that are not one direct chunk a spare page.  False if the data
 * does not fit the slot (@arg: its pages) or needs too many spare pages.
 */
static bool bius_plan_chunk(struct bius_cmd *cmd, const struct bius_chunk *c,
			    void *arg)
{
	const u32 *slot_pages = arg;

	if (c->vpage >= *slot_pages)
		return false;
	if (c->new_seg) {
		cmd->segs[cmd->nr_segs].off = c->vpage << PAGE_SHIFT |
					      c->vpage_off;
		cmd->segs[cmd->nr_segs++].len = 0;
	}
	cmd->segs[cmd->nr_segs - 1].len += c->len;
	cmd->map_pages = c->vpage + 1;
	if (bius_chunk_direct(c) || bius_spare_of(cmd, c->vpage) >= 0)
		return true;
	if (cmd->nr_spare == BIUS_MAP_REQ_SPARES)
		return false;
	cmd->spare_vpage[cmd->nr_spare++] = c->vpage;
	return true;
}

/* Lay out @rq's data in its slot (see bius_plan_chunk()). */
static bool bius_plan(struct bius_window *win, struct request *rq)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	u32 slot_pages = win->slot_bytes >> PAGE_SHIFT;

	cmd->nr_segs = 0;
	cmd->nr_spare = 0;
	cmd->map_pages = 0;
	return bius_walk_chunks(rq, bius_plan_chunk, &slot_pages);
}

/* Take the planned number of spare pages from the pool, if it has them. */
static bool bius_take_spares(struct bius_window *win, struct bius_cmd *cmd)
{
	bool ok;
	u32 i;

	spin_lock(&win->spare_lock);
	ok = win->nr_free >= cmd->nr_spare;
	for (i = 0; ok && i < cmd->nr_spare; i++)
		cmd->spare_index[i] = win->free[--win->nr_free];
	spin_unlock(&win->spare_lock);
	return ok;
}

static void bius_give_spares(struct bius_window *win, struct bius_cmd *cmd)
{
	u32 i;

	spin_lock(&win->spare_lock);
	for (i = 0; i < cmd->nr_spare; i++)
		win->free[win->nr_free++] = cmd->spare_index[i];
	spin_unlock(&win->spare_lock);
	cmd->nr_spare = 0;
}

struct bius_map_ctx {
	struct bius_window *win;
	unsigned long slot;	/* user address of the slot */
	pgprot_t prot;
	bool write;		/* the data goes to the daemon */
};

/* The spare page given to slot page @vpage of a planned request. */
static struct page *bius_spare_page(struct bius_window *win,
				    const struct bius_cmd *cmd, u32 vpage)
{
	return win->spare[cmd->spare_index[bius_spare_of(cmd, vpage)]];
}

/*
 * Map, first pass: the frame of each slot page, the buffer's page or a
 * spare page; write data into the (zeroed) spare pages.
 */
static bool bius_map_chunk(struct bius_cmd *cmd, const struct bius_chunk *c,
			   void *arg)
{
	struct bius_map_ctx *m = arg;
	struct page *spare;

	if (bius_chunk_direct(c)) {
		m->win->pfns[c->vpage] = page_to_pfn(c->page);
		return true;
	}
	spare = bius_spare_page(m->win, cmd, c->vpage);
	m->win->pfns[c->vpage] = page_to_pfn(spare);
	if (m->write)
		memcpy_from_page(page_address(spare) + c->vpage_off, c->page,
				 c->page_off, c->len);
	return true;
}

struct bius_pte_fill {
	struct mm_struct *mm;
	const unsigned long *pfns;	/* a frame per page */
	pgprot_t prot;
	u32 next;
};

/* apply_to_page_range() callback: map the next frame (PTE lock held). */
static int bius_set_pte(pte_t *pte, unsigned long addr, void *data)
{
	struct bius_pte_fill *f = data;
	unsigned long pfn = f->pfns[f->next++];

	if (!pte_none(ptep_get(pte)))
		return -EBUSY;
	set_pte_at(f->mm, addr, pte, pte_mkspecial(pfn_pte(pfn, f->prot)));
	return 0;
}

/*
 * Set the PTEs of @pages window pages from @addr (mmap_lock held) to the
 * frames @pfns.  False if a PTE is present or a page table cannot be
 * allocated.
 */
static bool bius_set_ptes(struct bius_window *win, unsigned long addr,
			  u32 pages, const unsigned long *pfns, pgprot_t prot)
{
	struct bius_pte_fill f = {
		.mm = win->mm,
		.pfns = pfns,
		.prot = prot,
	};

	return !apply_to_page_range(win->mm, addr,
				    (unsigned long)pages << PAGE_SHIFT,
				    bius_set_pte, &f);
}

/* Read completed: copy the spare pages' data into the buffer. */
static bool bius_copy_out_chunk(struct bius_cmd *cmd,
				const struct bius_chunk *c, void *arg)
{
	struct bius_window *win = arg;
	struct page *spare;

	if (bius_chunk_direct(c))
		return true;
	spare = bius_spare_page(win, cmd, c->vpage);
	memcpy_to_page(c->page, c->page_off,
		       page_address(spare) + c->vpage_off, c->len);
	return true;
}

static unsigned long bius_slot_addr(struct bius_window *win,
				    struct request *rq)
{
	return win->start + (unsigned long)rq->tag * win->slot_bytes;
}

/* Is @rq one to map, by its op and the device's transfer mode? */
static bool bius_map_wanted(struct bius_queue *q, struct request *rq)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (!bius_op_has_data(cmd->op) || bius_cmd_no_data(cmd))
		return false;
	return blk_rq_bytes(rq) &&
	       blk_rq_bytes(rq) >= q->dev->params.map_threshold;
}

/*
 * Zap the first @pages pages of @rq's slot in every VMA of the window, as
 * truncate zaps a file's pages: under the mapping's i_mmap_rwsem, TLBs
 * flushed, no mmap_lock needed.
 */
static void bius_zap(struct bius_window *win, struct request *rq, u32 pages)
{
	loff_t pos = ((loff_t)win->pgoff << PAGE_SHIFT) +
		     (loff_t)rq->tag * win->slot_bytes;

	/* a length of 0 would be the whole file */
	if (pages)
		unmap_mapping_range(win->mapping, pos,
				    (loff_t)pages << PAGE_SHIFT, 1);
}

static bool bius_map_insert(struct bius_window *win, struct request *rq)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct bius_map_ctx m = {
		.win = win,
		.slot = bius_slot_addr(win, rq),
		.write = cmd->op != BIUS_OP_READ,
	};
	struct vm_area_struct *vma;
	bool ok = false;
	u32 i;

	m.prot = m.write ? win->prot_read : win->prot_write;
	/*
	 * Never wait for the mmap_lock with xfer_lock held: a daemon thread
	 * may hold it while it waits for this disk's I/O, which a recovery
	 * holds until the registry lock (which waits for xfer_lock) is free.
	 * Contended, the request goes through the streams instead.
	 */
	if (!mmap_read_trylock(win->mm))
		return false;
	vma = bius_window_vma(win);
	if (!vma)
		goto out;
	/* the zero or sink page of the slot's idle time goes first */
	clear_bit(rq->tag, win->sunk);
	if (test_and_clear_bit(rq->tag, win->stale))
		bius_zap(win, rq, win->slot_bytes >> PAGE_SHIFT);
	for (i = 0; i < cmd->nr_spare; i++)
		clear_page(page_address(win->spare[cmd->spare_index[i]]));
	ok = bius_walk_chunks(rq, bius_map_chunk, &m) &&
	     bius_set_ptes(win, m.slot, cmd->map_pages, win->pfns, m.prot);
	if (!ok)
		bius_zap(win, rq, cmd->map_pages);
out:
	mmap_read_unlock(win->mm);
	return ok;
}

/*
 * read() side (xfer_lock held, the request taken): map @rq's data into its
 * slot if the transfer mode wants it and it can be now, with its segment
 * records (if it has more than one segment) in at most @room bytes of the
 * stream; sets cmd->mapped.  A request that is not mapped goes through the
 * streams.
 */
bool bius_map_rq(struct bius_queue *q, struct request *rq, size_t room)
{
	/* pairs with cmpxchg_release() in bius_mmap() */
	struct bius_window *win = smp_load_acquire(&q->win);
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	bool ok;

	lockdep_assert_held(&q->xfer_lock);
	cmd->mapped = false;
	if (!win || !bius_map_wanted(q, rq) || !bius_plan(win, rq))
		return false;
	if (cmd->nr_segs > 1 &&
	    room < cmd->nr_segs * sizeof(struct bius_segment))
		return false;
	if (!bius_take_spares(win, cmd))
		return false;

	ok = mmget_not_zero(win->mm);
	if (ok) {
		ok = bius_map_insert(win, rq);
		mmput(win->mm);
	}
	if (!ok) {
		bius_give_spares(win, cmd);
		return false;
	}
	refcount_inc(&win->ref);	/* q->win's, kept by xfer_lock */
	cmd->mapped = true;
	cmd->win = win;
	return true;
}

/*
 * Take @rq's pages out of the daemon's reach: out of the window's PTEs and
 * every TLB.  Without the mmap_lock: a daemon thread may hold it while it
 * waits for this disk's I/O, and a writer queued behind it (munmap(),
 * mmap()) would block every reader that comes after.  For an aborted
 * request the daemon may still be working on, the range faults in the
 * sink page from then on (bius_vm_fault()), and the next request of the
 * tag zaps it.
 *
 * A munmap() takes the window's VMA out of the mapping's tree before it
 * flushes the TLBs of the PTEs it zapped, with the mm's tlb_flush_pending
 * raised from before that zap until after the flush: a VMA that
 * bius_zap() did not find may be one such, so wait for the flushes
 * pending while the window is still mapped.  (If bius_zap() found the VMA
 * after a munmap() zapped it, tlb_finish_mmu() saw the nested flush and
 * flushed all.)
 */
static void bius_unmap_range(struct bius_window *win, struct request *rq,
			     enum bius_unmap how)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);

	if (how == BIUS_UNMAP_ABORT) {
		set_bit(rq->tag, win->stale);
		set_bit(rq->tag, win->sunk);
		/* the bits before the zap: a fault that finds no PTE sees them */
		smp_mb__after_atomic();
	}
	bius_zap(win, rq, cmd->map_pages);
	while (atomic_read(&win->nr_vmas) && mm_tlb_flush_pending(win->mm))
		schedule_timeout_uninterruptible(1);
}

/*
 * Unmap a mapped request before it ends, by whoever owns it (completion,
 * timeout, death): see enum bius_unmap.  A no-op for a request that is not
 * mapped.
 */
void bius_unmap_rq(struct request *rq, enum bius_unmap how)
{
	struct bius_cmd *cmd = blk_mq_rq_to_pdu(rq);
	struct bius_window *win;

	if (!cmd->mapped)
		return;
	cmd->mapped = false;
	win = cmd->win;
	cmd->win = NULL;
	bius_unmap_range(win, rq, how);
	/* a write's buffer is the writer's: only a read's spare data goes */
	if (how == BIUS_UNMAP_OK && cmd->op == BIUS_OP_READ && cmd->nr_spare)
		bius_walk_chunks(rq, bius_copy_out_chunk, win);
	bius_give_spares(win, cmd);
	bius_window_put(win);
}
