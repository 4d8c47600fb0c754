// Kernel interface constants newer than the installed kernel headers.
//
// The build machines carry Debian bookworm's 6.1 headers, but these features
// arrived later: MFD_NOEXEC_SEAL in 6.3, UFFD_FEATURE_WP_UNPOPULATED in 6.4,
// UFFD_FEATURE_WP_ASYNC and PAGEMAP_SCAN in 6.7, UFFDIO_MOVE in 6.8. Each definition is copied
// exactly from upstream include/uapi/linux/{userfaultfd,memfd,fs}.h and is
// used only when the installed header lacks it. Whether the running kernel
// supports them is decided at run time (kernel.cpp: probe_kernel()).
#pragma once

#include <linux/fs.h>
#include <linux/memfd.h>
#include <linux/types.h>
#include <linux/userfaultfd.h>
#include <sys/ioctl.h>

// --- include/uapi/linux/userfaultfd.h ---------------------------------------

#ifndef USERFAULTFD_IOC
#define USERFAULTFD_IOC 0xAA
#endif
#ifndef USERFAULTFD_IOC_NEW
#define USERFAULTFD_IOC_NEW _IO(USERFAULTFD_IOC, 0x00)
#endif

#ifndef UFFD_FEATURE_WP_UNPOPULATED
#define UFFD_FEATURE_WP_UNPOPULATED		(1<<13)
#endif
#ifndef UFFD_FEATURE_POISON
#define UFFD_FEATURE_POISON			(1<<14)
#endif
#ifndef UFFD_FEATURE_WP_ASYNC
#define UFFD_FEATURE_WP_ASYNC			(1<<15)
#endif

#ifndef UFFD_FEATURE_MOVE
#define UFFD_FEATURE_MOVE			(1<<16)
#endif

#ifndef UFFDIO_COPY_MODE_WP
#define UFFDIO_COPY_MODE_WP			((__u64)1<<1)
#endif

#ifndef _UFFDIO_MOVE
#define _UFFDIO_MOVE				(0x05)
#define UFFDIO_MOVE		_IOWR(UFFDIO, _UFFDIO_MOVE,	\
				      struct uffdio_move)
struct uffdio_move {
	__u64 dst;
	__u64 src;
	__u64 len;
#define UFFDIO_MOVE_MODE_DONTWAKE		((__u64)1<<0)
#define UFFDIO_MOVE_MODE_ALLOW_SRC_HOLES	((__u64)1<<1)
	__u64 mode;
	/*
	 * "move" is written by the ioctl and must be at the end: the
	 * copy_from_user will not read the last 8 bytes.
	 */
	__s64 move;
};
#endif

// --- include/uapi/linux/memfd.h ---------------------------------------------

#ifndef MFD_NOEXEC_SEAL
#define MFD_NOEXEC_SEAL		0x0008U
#endif

// --- include/uapi/linux/fs.h ------------------------------------------------

#ifndef PAGEMAP_SCAN

/* Pagemap ioctl */
#define PAGEMAP_SCAN	_IOWR('f', 16, struct pm_scan_arg)

/* Bitmasks provided in pm_scan_args masks and reported in page_region.categories. */
#define PAGE_IS_WPALLOWED	(1 << 0)
#define PAGE_IS_WRITTEN		(1 << 1)
#define PAGE_IS_FILE		(1 << 2)
#define PAGE_IS_PRESENT		(1 << 3)
#define PAGE_IS_SWAPPED		(1 << 4)
#define PAGE_IS_PFNZERO		(1 << 5)
#define PAGE_IS_HUGE		(1 << 6)
#define PAGE_IS_SOFT_DIRTY	(1 << 7)

/*
 * struct page_region - Page region with flags
 * @start:	Start of the region
 * @end:	End of the region (exclusive)
 * @categories:	PAGE_IS_* category bitmask for the region
 */
struct page_region {
	__u64 start;
	__u64 end;
	__u64 categories;
};

/* Flags for PAGEMAP_SCAN ioctl */
#define PM_SCAN_WP_MATCHING	(1 << 0)	/* Write protect the pages matched. */
#define PM_SCAN_CHECK_WPASYNC	(1 << 1)	/* Abort the scan when a non-WP-enabled page is found. */

/*
 * struct pm_scan_arg - Pagemap ioctl argument
 * @size:		Size of the structure
 * @flags:		Flags for the IOCTL
 * @start:		Starting address of the region
 * @end:		Ending address of the region
 * @walk_end		Address where the scan stopped (written by kernel).
 *			walk_end == end (address tags cleared) informs that the scan completed on entire range.
 * @vec:		Address of page_region struct array for output
 * @vec_len:		Length of the page_region struct array
 * @max_pages:		Optional limit for number of returned pages (0 = disabled)
 * @category_inverted:	PAGE_IS_* categories which values match if 0 instead of 1
 * @category_mask:	Skip pages for which any category doesn't match
 * @category_anyof_mask: Skip pages for which no category matches
 * @return_mask:	PAGE_IS_* categories that are to be reported in `page_region`s returned
 */
struct pm_scan_arg {
	__u64 size;
	__u64 flags;
	__u64 start;
	__u64 end;
	__u64 walk_end;
	__u64 vec;
	__u64 vec_len;
	__u64 max_pages;
	__u64 category_inverted;
	__u64 category_mask;
	__u64 category_anyof_mask;
	__u64 return_mask;
};

#endif  // PAGEMAP_SCAN

static_assert(sizeof(struct uffdio_api) == 24);
static_assert(sizeof(struct uffdio_copy) == 40);
static_assert(sizeof(struct uffdio_move) == 40);
static_assert(sizeof(struct uffdio_writeprotect) == 24);
static_assert(sizeof(struct page_region) == 24);
static_assert(sizeof(struct pm_scan_arg) == 96);
