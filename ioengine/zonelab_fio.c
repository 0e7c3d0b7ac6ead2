/*
 * zonelab_fio.c: an external I/O engine that lets real fio (3.33) drive an emulated zonelab ZNS device in real
 * time, through the zonelab C library (include/zonelab.h).
 *
 *   fio --thread --ioengine=external:/path/to/libzonelab_fio.so --filename='preset\:zn540' \
 *       --zonemode=zbd --direct=1 --rw=write --bs=64k --size=4z
 *
 * The file name is a zonelab device spec: `preset:NAME[,key=value...]` (fio splits file names at ':', so the
 * colon is escaped) or the path of a device image. Every job of one fio run that names the same spec shares one
 * device, so fio must run its jobs as threads (--thread): a device lives in one process.
 *
 * fio's own zoned-block-device logic (--zonemode=zbd) drives the device through the engine's zone operations:
 * the zoned model (host-managed), zone reports, write-pointer resets and the open-zone limit. Reads and writes
 * are submitted asynchronously and complete when the device model says they do; a status the device returns
 * becomes the errno Linux would report for it.
 *
 * Built against fio's own headers (of the same version as the fio binary) by ioengine/build.sh.
 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "fio.h"
#include "zbd_types.h"
#include "zonelab.h"

/* One open device, shared by every job of the run that names its spec. */
struct zonelab_device {
	char *spec;
	uint64_t handle;
	struct zl_geometry geometry;
	unsigned int users;
	struct zonelab_device *next;
};

/* What one job (thread) keeps: the devices its files hold a reference to (fio frees its files before the
 * engine's cleanup), and the completions its last getevents collected. */
struct zonelab_job {
	struct zonelab_device **devices;
	unsigned int nr_devices;
	struct zl_completion *completions;
	struct io_u **events;
	unsigned int depth;
};

static pthread_mutex_t devices_lock = PTHREAD_MUTEX_INITIALIZER;
static struct zonelab_device *devices;

/* The device for `spec`, opened in real time on first use; each call takes a reference. */
static struct zonelab_device *device_attach(const char *spec, int *error)
{
	struct zonelab_device *device;
	int32_t code;

	pthread_mutex_lock(&devices_lock);
	for (device = devices; device; device = device->next) {
		if (!strcmp(device->spec, spec)) {
			device->users++;
			pthread_mutex_unlock(&devices_lock);
			return device;
		}
	}
	device = calloc(1, sizeof(*device));
	if (!device) {
		*error = ENOMEM;
		goto out;
	}
	device->spec = strdup(spec);
	code = zl_open(spec, ZL_MODE_REALTIME, &device->handle);
	if (code == ZL_OK)
		code = zl_get_geometry(device->handle, &device->geometry);
	if (code != ZL_OK || !device->spec) {
		/* fio splits --filename at each unescaped ':', so "preset:zn540" arrives as "preset". */
		const char *hint = strcmp(spec, "preset") ? "" :
			" (fio splits --filename at each ':'; write preset\\:NAME, as in --filename=preset\\:zn540)";
		const char *why = code == ZL_OK ? "" : zl_last_error();
		log_err("zonelab: cannot open device '%s': %s%s\n", spec, *why ? why : zl_strerror(code), hint);
		free(device->spec);
		free(device);
		device = NULL;
		*error = code == ZL_OK ? ENOMEM : zl_errno(code);
		goto out;
	}
	device->users = 1;
	device->next = devices;
	devices = device;
out:
	pthread_mutex_unlock(&devices_lock);
	return device;
}

/* Says how the device kept the model's pace over the run, so that figures from a run whose device thread
 * could not keep time are seen as such. On standard error: fio's log_info writes to standard output, where
 * it would break --output-format=json and terse output. */
static void print_pacing(const struct zonelab_device *device)
{
	/* Figures and the placement (with an OS error when best effort was refused) fit well within this. */
	char line[1024];
	size_t needed = 0;

	if (zl_pacing_line(device->handle, line, sizeof(line), &needed) == ZL_OK)
		fprintf(stderr, "zonelab: %s: %s\n", device->spec, line);
}

/* Drops a reference; the last one closes the device (completing its commands and flushing it). */
static void device_detach(struct zonelab_device *device)
{
	struct zonelab_device **link;

	pthread_mutex_lock(&devices_lock);
	if (--device->users == 0) {
		for (link = &devices; *link; link = &(*link)->next) {
			if (*link == device) {
				*link = device->next;
				break;
			}
		}
		print_pacing(device);
		zl_close(device->handle);
		free(device->spec);
		free(device);
	}
	pthread_mutex_unlock(&devices_lock);
}

static uint64_t lba_bytes(const struct zonelab_device *device)
{
	return device->geometry.lba_size_bytes;
}

/* The device a file names; files are attached in setup, before any other hook sees them. */
static struct zonelab_device *file_device(struct fio_file *f)
{
	return FILE_ENG_DATA(f);
}

/* A file is as large as its device's namespace. */
static void set_file_size(struct fio_file *f, const struct zonelab_device *device)
{
	f->real_file_size = device->geometry.namespace_size_lba * lba_bytes(device);
	fio_file_set_size_known(f);
}

/* Runs in fio's main thread for each job before the jobs start: attaches each file to its device. */
static int zonelab_setup(struct thread_data *td)
{
	struct fio_file *f;
	unsigned int i;
	int error = 0;

	if (!td->o.use_thread) {
		log_err("zonelab: run fio with --thread: the emulated device lives in one process\n");
		return 1;
	}
	for_each_file(td, f, i) {
		struct zonelab_device *device = file_device(f);

		if (!device) {
			device = device_attach(f->file_name, &error);
			if (!device) {
				td_verror(td, error, "zonelab open");
				return 1;
			}
			FILE_SET_ENG_DATA(f, device);
		}
		set_file_size(f, device);
		/* A zoned block device, not a regular file in which fio would emulate zones. */
		f->filetype = FIO_TYPE_BLOCK;
	}
	return 0;
}

static void job_free(struct zonelab_job *job)
{
	unsigned int i;

	for (i = 0; i < job->nr_devices; i++)
		device_detach(job->devices[i]);
	free(job->devices);
	free(job->completions);
	free(job->events);
	free(job);
}

/* Runs in the job's thread: takes over the references its files' setup took. */
static int zonelab_init(struct thread_data *td)
{
	struct zonelab_job *job = calloc(1, sizeof(*job));
	struct fio_file *f;
	unsigned int i;

	if (!job)
		return 1;
	job->depth = td->o.iodepth ? td->o.iodepth : 1;
	job->completions = calloc(job->depth, sizeof(*job->completions));
	job->events = calloc(job->depth, sizeof(*job->events));
	job->devices = calloc(td->o.nr_files ? td->o.nr_files : 1, sizeof(*job->devices));
	if (!job->completions || !job->events || !job->devices) {
		job_free(job);
		return 1;
	}
	for_each_file(td, f, i) {
		if (file_device(f) && job->nr_devices < (td->o.nr_files ? td->o.nr_files : 1))
			job->devices[job->nr_devices++] = file_device(f);
	}
	td->io_ops_data = job;
	return 0;
}

/* The last job to end closes the device: its commands complete and it is flushed (an image keeps its data and
 * the flash model's wear). */
static void zonelab_cleanup(struct thread_data *td)
{
	struct zonelab_job *job = td->io_ops_data;

	if (job) {
		job_free(job);
		td->io_ops_data = NULL;
	}
}

/* The engine has no file to open: the device is opened in setup and closed in cleanup. */
static int zonelab_open_file(struct thread_data *td, struct fio_file *f)
{
	(void)td;
	return file_device(f) ? 0 : ENODEV;
}

static int zonelab_close_file(struct thread_data *td, struct fio_file *f)
{
	(void)td;
	(void)f;
	return 0;
}

static int zonelab_get_file_size(struct thread_data *td, struct fio_file *f)
{
	struct zonelab_device *device = file_device(f);

	(void)td;
	if (!device)
		return ENODEV;
	set_file_size(f, device);
	return 0;
}

/* Completes an io_u at once with `error`, as a failed submission. */
static enum fio_q_status complete_now(struct io_u *io_u, int error)
{
	io_u->error = error;
	io_u->resid = error ? io_u->xfer_buflen : 0;
	return FIO_Q_COMPLETED;
}

/* The pieces of an io_u still in flight: kept in its engine_data, counted down as they complete. */
static uintptr_t pieces_left(const struct io_u *io_u)
{
	return (uintptr_t)io_u->engine_data;
}

/* Submits a read or write of `io` in pieces of at most the device's MDTS, in order, as the block layer splits
 * what is larger than max_hw_sectors_kb: the io_u completes when its last piece does, with the first error. */
static enum fio_q_status submit_split(struct zonelab_device *device, struct io_u *io_u, struct zl_io io)
{
	uint64_t block = lba_bytes(device);
	uint64_t max_blocks = device->geometry.mdts_bytes ? device->geometry.mdts_bytes / block : io.nlb;
	uint32_t left = io.nlb;
	uintptr_t submitted = 0;

	io_u->error = 0;
	while (left) {
		struct zl_io piece = io;
		int32_t code;

		piece.nlb = left < max_blocks ? left : (uint32_t)max_blocks;
		/* Completions are collected by this thread's getevents only, after queue returns: counting a piece
		 * once it is submitted is in time. */
		code = zl_submit(device->handle, &piece, (uint64_t)(uintptr_t)io_u);
		if (code != ZL_OK) {
			if (!submitted)
				return complete_now(io_u, zl_errno(code));
			/* The pieces in flight complete the io_u, with this error. */
			io_u->error = zl_errno(code);
			return FIO_Q_QUEUED;
		}
		io_u->engine_data = (void *)++submitted;
		left -= piece.nlb;
		io.slba += piece.nlb;
		io.buf += (uint64_t)piece.nlb * block;
	}
	return FIO_Q_QUEUED;
}

static enum fio_q_status queue_io(struct thread_data *td, struct io_u *io_u)
{
	struct zonelab_device *device = file_device(io_u->file);
	uint64_t block = lba_bytes(device);
	struct zl_io io = { 0 };
	int32_t code;

	fio_ro_check(td, io_u);
	switch (io_u->ddir) {
	case DDIR_READ:
	case DDIR_WRITE:
		if (io_u->offset % block || io_u->xfer_buflen % block || !io_u->xfer_buflen)
			return complete_now(io_u, EINVAL);
		io.opcode = io_u->ddir == DDIR_READ ? ZL_OP_READ : ZL_OP_WRITE;
		io.slba = io_u->offset / block;
		io.nlb = io_u->xfer_buflen / block;
		io.buf = io_u->xfer_buf;
		return submit_split(device, io_u, io);
	case DDIR_SYNC:
	case DDIR_DATASYNC:
		io.opcode = ZL_OP_FLUSH;
		break;
	case DDIR_TRIM:
		/* On a conventional namespace a trim deallocates its blocks. */
		if (device->geometry.kind == ZL_NS_CONVENTIONAL) {
			if (io_u->offset % block || io_u->xfer_buflen % block || !io_u->xfer_buflen)
				return complete_now(io_u, EINVAL);
			io.opcode = ZL_OP_DEALLOCATE;
			io.slba = io_u->offset / block;
			io.nlb = io_u->xfer_buflen / block;
			break;
		}
		/* With --zonemode=zbd, fio's zoned code resets the zone (through reset_wp) and its own record of the
		 * write pointer, as its synchronous engines have it do: a reset behind its back would leave the record
		 * stale, and its next write off the write pointer. */
		if (td->o.zone_mode == ZONE_MODE_ZBD) {
			if (!do_io_u_trim(td, io_u))
				return complete_now(io_u, (int)io_u->error < 0 ? -(int)io_u->error : (io_u->error ? (int)io_u->error : EIO));
			return complete_now(io_u, 0);
		}
		/* A trim of one whole zone resets it, as a zoned block device's discard does. */
		if (io_u->offset % (device->geometry.zone_size_lba * block) ||
		    io_u->xfer_buflen != device->geometry.zone_size_lba * block)
			return complete_now(io_u, EINVAL);
		io.opcode = ZL_OP_ZONE_MGMT;
		io.action = ZL_ZONE_RESET;
		io.slba = io_u->offset / block;
		break;
	default:
		return complete_now(io_u, EINVAL);
	}
	io_u->error = 0;
	io_u->engine_data = (void *)(uintptr_t)1;
	code = zl_submit(device->handle, &io, (uint64_t)(uintptr_t)io_u);
	if (code != ZL_OK)
		return complete_now(io_u, zl_errno(code));
	return FIO_Q_QUEUED;
}

/* Collects completions until `min` whole io_us (all their pieces) are done, or nothing more comes within
 * `timeout_ns`, into the job's events; returns how many, or a negative errno. */
static int collect(struct thread_data *td, unsigned int min, unsigned int max, uint64_t timeout_ns)
{
	struct zonelab_job *job = td->io_ops_data;
	struct zonelab_device *device = file_device(td->files[0]);
	unsigned int i, count = 0;
	int32_t code;

	if (max > job->depth)
		max = job->depth;
	if (min > max)
		min = max;
	do {
		unsigned int polled = 0;

		code = zl_poll_wait(device->handle, job->completions, max, count < min ? 1 : 0, timeout_ns, &polled);
		if (code != ZL_OK) {
			td_verror(td, zl_errno(code), "zonelab poll");
			return -zl_errno(code);
		}
		for (i = 0; i < polled; i++) {
			struct io_u *io_u = (struct io_u *)(uintptr_t)job->completions[i].tag;

			if (job->completions[i].status != ZL_OK && !io_u->error)
				io_u->error = zl_errno(job->completions[i].status);
			io_u->engine_data = (void *)(pieces_left(io_u) - 1);
			if (pieces_left(io_u) == 0) {
				io_u->resid = io_u->error ? io_u->xfer_buflen : 0;
				job->events[count++] = io_u;
			}
		}
		if (!polled)
			break;
	} while (count < min);
	return count;
}

/* The issue time is taken here, before the command reaches the device, for both ways an I/O completes
 * (FIO_ASYNCIO_SETS_ISSUE_TIME). At iodepth 1 the engine waits for the I/O before it returns, as a synchronous
 * engine (psync) does: an error then comes back at submission, where fio looks for the first I/O's error to
 * suggest --zonemode=zbd, and nothing is lost, since a job of depth 1 has nothing else to submit meanwhile. */
static enum fio_q_status zonelab_queue(struct thread_data *td, struct io_u *io_u)
{
	struct zonelab_job *job = td->io_ops_data;
	enum fio_q_status status;
	int done;

	if (fio_fill_issue_time(td))
		fio_gettime(&io_u->issue_time, NULL);
	status = queue_io(td, io_u);
	if (status != FIO_Q_QUEUED || job->depth != 1)
		return status;
	done = collect(td, 1, 1, 0);
	if (done < 0)
		return complete_now(io_u, -done);
	return FIO_Q_COMPLETED;
}

/* Pieces of split I/Os complete one by one: `min` counts whole io_us. */
static int zonelab_getevents(struct thread_data *td, unsigned int min, unsigned int max, const struct timespec *t)
{
	return collect(td, min, max, t ? (uint64_t)t->tv_sec * 1000000000ull + (uint64_t)t->tv_nsec : 0);
}

static struct io_u *zonelab_event(struct thread_data *td, int event)
{
	struct zonelab_job *job = td->io_ops_data;

	return job->events[event];
}

/* A conventional namespace is a plain block device to fio; a zoned one is host managed. */
static int zonelab_get_zoned_model(struct thread_data *td, struct fio_file *f, enum zbd_zoned_model *model)
{
	(void)td;
	*model = file_device(f)->geometry.kind == ZL_NS_CONVENTIONAL ? ZBD_NONE : ZBD_HOST_MANAGED;
	return 0;
}

/* Zones a single report asks for: one report must fit the device's transfer size (MDTS). */
#define REPORT_CHUNK_ZONES 1024u

/* Zone states: zonelab reports them as NVMe encodes them, which are fio's codes too. */
static int zonelab_report_zones(struct thread_data *td, struct fio_file *f, uint64_t offset,
				struct zbd_zone *zbdz, unsigned int nr_zones)
{
	struct zonelab_device *device = file_device(f);
	uint64_t block, start_lba;
	struct zl_zone *zones;
	unsigned int i, got = 0;
	int32_t code = ZL_OK;

	if (!device) {
		device = device_attach(f->file_name, &(int){ 0 });
		if (!device)
			return -ENODEV;
		FILE_SET_ENG_DATA(f, device);
	}
	block = lba_bytes(device);
	start_lba = offset / block;
	zones = calloc(REPORT_CHUNK_ZONES, sizeof(*zones));
	if (!zones)
		return -ENOMEM;
	while (got < nr_zones && start_lba < device->geometry.namespace_size_lba) {
		uint32_t count = nr_zones - got < REPORT_CHUNK_ZONES ? nr_zones - got : REPORT_CHUNK_ZONES;

		code = zl_report_zones(device->handle, start_lba, zones, &count);
		if (code != ZL_OK || count == 0)
			break;
		for (i = 0; i < count; i++, zbdz++) {
			zbdz->start = zones[i].start_lba * block;
			zbdz->len = zones[i].len_lba * block;
			zbdz->capacity = zones[i].capacity_lba * block;
			zbdz->type = ZBD_ZONE_TYPE_SWR;
			zbdz->cond = (enum zbd_zone_cond)zones[i].cond;
			switch (zbdz->cond) {
			case ZBD_ZONE_COND_FULL:
				zbdz->wp = zbdz->start + zbdz->len;
				break;
			case ZBD_ZONE_COND_READONLY:
			case ZBD_ZONE_COND_OFFLINE:
				/* As fio's own libzbc engine does: zones not to use, write pointer at the start. */
				zbdz->cond = ZBD_ZONE_COND_OFFLINE;
				zbdz->wp = zbdz->start;
				break;
			default:
				zbdz->wp = zones[i].wp_lba * block;
			}
		}
		got += count;
		start_lba = zones[count - 1].start_lba + zones[count - 1].len_lba;
	}
	free(zones);
	if (code != ZL_OK) {
		log_err("zonelab: report zones at LBA %llu: %s\n", (unsigned long long)start_lba, zl_strerror(code));
		td_verror(td, zl_errno(code), "zonelab report zones");
		return -zl_errno(code);
	}
	return got;
}

static int zonelab_reset_wp(struct thread_data *td, struct fio_file *f, uint64_t offset, uint64_t length)
{
	struct zonelab_device *device = file_device(f);
	uint64_t block = lba_bytes(device);
	uint64_t zone_bytes = device->geometry.zone_size_lba * block;
	uint64_t at;
	int32_t code = ZL_OK;

	if (offset == 0 && length >= f->real_file_size) {
		code = zl_zone_mgmt(device->handle, ZL_ZONE_RESET, 0, 1);
	} else {
		for (at = offset; at < offset + length && code == ZL_OK; at += zone_bytes)
			code = zl_zone_mgmt(device->handle, ZL_ZONE_RESET, at / block, 0);
	}
	if (code != ZL_OK) {
		log_err("zonelab: reset of the zones at %llu+%llu: %s\n", (unsigned long long)offset,
			(unsigned long long)length, zl_strerror(code));
		td_verror(td, zl_errno(code), "zonelab reset");
		return -zl_errno(code);
	}
	return 0;
}

static int zonelab_get_max_open_zones(struct thread_data *td, struct fio_file *f, unsigned int *max_open_zones)
{
	struct zonelab_device *device = file_device(f);

	(void)td;
	if (!device)
		return -ENODEV;
	*max_open_zones = device->geometry.max_open_zones;
	return 0;
}

/* fio looks this symbol up by name in the shared object (ioengines.c, dlopen_ioengine). */
struct ioengine_ops ioengine = {
	.name = "zonelab",
	.version = FIO_IOOPS_VERSION,
	.flags = FIO_DISKLESSIO | FIO_NOEXTEND | FIO_NODISKUTIL | FIO_RAWIO | FIO_ASYNCIO_SETS_ISSUE_TIME,
	.setup = zonelab_setup,
	.init = zonelab_init,
	.queue = zonelab_queue,
	.getevents = zonelab_getevents,
	.event = zonelab_event,
	.cleanup = zonelab_cleanup,
	.open_file = zonelab_open_file,
	.close_file = zonelab_close_file,
	.get_file_size = zonelab_get_file_size,
	.get_zoned_model = zonelab_get_zoned_model,
	.report_zones = zonelab_report_zones,
	.reset_wp = zonelab_reset_wp,
	.get_max_open_zones = zonelab_get_max_open_zones,
};
