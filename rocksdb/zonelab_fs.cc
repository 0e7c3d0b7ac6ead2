// A RocksDB FileSystem on zonelab: a thin shim from RocksDB's FileSystem API to zonedfs's C functions
// (zlfs_* in include/zonelab.h). Loaded into an unmodified RocksDB program with LD_PRELOAD, it registers the
// URI scheme zonelab:// with RocksDB's object registry, so that
//
//   LD_PRELOAD=target/release/libzonelab_rocksdb.so db_bench --fs_uri='zonelab://preset:instant?scheduler=zinc'
//
// runs db_bench on an emulated ZNS device in real time. Everything after zonelab:// up to an optional '?' is
// the device spec (an image path or preset:NAME[,key=value...]); '%3D' may stand for '=' (RocksDB reads a
// value with '=' as an option map). The query is the mount options of zlfs_mount. One mount per spec and
// process, shared by every FileSystem object RocksDB makes for it, unmounted at exit.
//
// Built by rocksdb/build.sh against Debian's librocksdb 7.8.3. docs/rocksdb.md says what is supported.

#include <rocksdb/file_system.h>
#include <rocksdb/io_status.h>
#include <rocksdb/utilities/object_registry.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "zonelab.h"

namespace zonelab {

using rocksdb::FileOptions;
using rocksdb::IODebugContext;
using rocksdb::IOOptions;
using rocksdb::IOStatus;
using rocksdb::Slice;

namespace {

// RocksDB's view of a zlfs_* failure, with the library's words for it.
IOStatus Failed(int err, const std::string& what) {
  std::string message = what + ": " + zlfs_last_error();
  switch (err) {
    case 0:
      return IOStatus::OK();
    case ENOENT:
      return IOStatus::PathNotFound(message);
    case ENOSPC: {
      IOStatus status = IOStatus::NoSpace(message);
      return status;
    }
    case EINVAL:
      return IOStatus::InvalidArgument(message);
    case EEXIST:
    case ENOTEMPTY:
    case EBUSY:
      return IOStatus::IOError(message);
    default:
      return IOStatus::IOError(message);
  }
}

std::string Decode(const std::string& text) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && text.compare(i + 1, 2, "3D") == 0) {
      out += '=';
      i += 2;
    } else {
      out += text[i];
    }
  }
  return out;
}

// Every mount this process made, by URI; unmounted (synced and flushed) when the process exits normally.
class Mounts {
 public:
  // With ZONELAB_STATS set, each mount's counters (zlfs_stats_json) go to stderr before it is unmounted.
  ~Mounts() {
    std::lock_guard<std::mutex> hold(mutex_);
    for (auto& mount : mounts_) {
      if (std::getenv("ZONELAB_STATS") != nullptr) {
        // The counters move while the device runs (its pacing figures with the clock), so the text may grow
        // between asking its size and taking it: ask again with the new size, with room to spare.
        size_t needed = 0;
        zlfs_stats_json(mount.second, nullptr, 0, &needed);
        for (int attempt = 0; attempt < 8; attempt++) {
          std::vector<char> text(needed + 256);
          if (zlfs_stats_json(mount.second, text.data(), text.size(), &needed) == 0) {
            std::string line = "zonelab stats " + mount.first + ": " + std::string(text.data()) + "\n";
            std::fputs(line.c_str(), stderr);
            break;
          }
        }
      }
      zlfs_unmount(mount.second);
    }
  }

  int Get(const std::string& uri, uint64_t* handle, std::string* error) {
    std::lock_guard<std::mutex> hold(mutex_);
    auto known = mounts_.find(uri);
    if (known != mounts_.end()) {
      *handle = known->second;
      return 0;
    }
    std::string rest = uri.substr(std::strlen("zonelab://"));
    size_t query = rest.find('?');
    std::string spec = Decode(rest.substr(0, query));
    std::string options = query == std::string::npos ? "" : Decode(rest.substr(query + 1));
    if (spec.empty()) {
      *error = "zonelab: the URI names no device: write zonelab://IMAGE or zonelab://preset:NAME";
      return EINVAL;
    }
    int err = zlfs_mount(spec.c_str(), options.c_str(), handle);
    if (err != 0) {
      *error = "zonelab: cannot mount " + spec + ": " + zlfs_last_error();
      return err;
    }
    mounts_[uri] = *handle;
    return 0;
  }

 private:
  std::mutex mutex_;
  std::map<std::string, uint64_t> mounts_;
};

Mounts& AllMounts() {
  static Mounts mounts;
  return mounts;
}

class SequentialFile : public rocksdb::FSSequentialFile {
 public:
  SequentialFile(uint64_t fs, uint64_t file, std::string name) : fs_(fs), file_(file), name_(std::move(name)) {}
  ~SequentialFile() override { zlfs_close(fs_, file_); }

  IOStatus Read(size_t n, const IOOptions&, Slice* result, char* scratch, IODebugContext*) override {
    size_t got = 0;
    int err = zlfs_read(fs_, file_, offset_, reinterpret_cast<uint8_t*>(scratch), n, &got);
    if (err != 0) return Failed(err, "read " + name_);
    offset_ += got;
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

  IOStatus PositionedRead(uint64_t offset, size_t n, const IOOptions&, Slice* result, char* scratch,
                          IODebugContext*) override {
    size_t got = 0;
    int err = zlfs_read(fs_, file_, offset, reinterpret_cast<uint8_t*>(scratch), n, &got);
    if (err != 0) return Failed(err, "read " + name_);
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

  IOStatus Skip(uint64_t n) override {
    offset_ += n;
    return IOStatus::OK();
  }

 private:
  uint64_t fs_, file_;
  std::string name_;
  uint64_t offset_ = 0;
};

class RandomAccessFile : public rocksdb::FSRandomAccessFile {
 public:
  RandomAccessFile(uint64_t fs, uint64_t file, std::string name) : fs_(fs), file_(file), name_(std::move(name)) {}
  ~RandomAccessFile() override { zlfs_close(fs_, file_); }

  IOStatus Read(uint64_t offset, size_t n, const IOOptions&, Slice* result, char* scratch,
                IODebugContext*) const override {
    size_t got = 0;
    int err = zlfs_read(fs_, file_, offset, reinterpret_cast<uint8_t*>(scratch), n, &got);
    if (err != 0) return Failed(err, "read " + name_);
    *result = Slice(scratch, got);
    return IOStatus::OK();
  }

 private:
  uint64_t fs_, file_;
  std::string name_;
};

// Appends gather here and reach the file system a quarter MiB at a time, or at Sync and Close: a call into
// zonedfs crosses to its host thread, which would cost more than the small appends of a WAL.
class WritableFile : public rocksdb::FSWritableFile {
 public:
  static constexpr size_t kGatherBytes = 256 << 10;

  WritableFile(uint64_t fs, uint64_t file, std::string name, uint64_t size)
      : fs_(fs), file_(file), name_(std::move(name)), size_(size) {}
  ~WritableFile() override {
    if (open_) {
      HandOver();
      zlfs_close(fs_, file_);
    }
  }

  IOStatus Append(const Slice& data, const IOOptions&, IODebugContext*) override {
    gathered_.append(data.data(), data.size());
    size_ += data.size();
    return gathered_.size() >= kGatherBytes ? HandOver() : IOStatus::OK();
  }

  IOStatus Append(const Slice& data, const IOOptions& options, const rocksdb::DataVerificationInfo&,
                  IODebugContext* dbg) override {
    return Append(data, options, dbg);
  }

  // Like RocksDB's posix file, Flush promises nothing about durability; only Sync does.
  IOStatus Flush(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }

  IOStatus Sync(const IOOptions&, IODebugContext*) override {
    IOStatus handed = HandOver();
    if (!handed.ok()) return handed;
    return Failed(zlfs_sync(fs_, file_), "sync " + name_);
  }

  IOStatus Fsync(const IOOptions& options, IODebugContext* dbg) override { return Sync(options, dbg); }

  IOStatus Close(const IOOptions&, IODebugContext*) override {
    if (!open_) return IOStatus::OK();
    open_ = false;
    IOStatus handed = HandOver();
    int err = zlfs_close(fs_, file_);
    return handed.ok() ? Failed(err, "close " + name_) : handed;
  }

  uint64_t GetFileSize(const IOOptions&, IODebugContext*) override { return size_; }

  void SetWriteLifeTimeHint(rocksdb::Env::WriteLifeTimeHint hint) override {
    write_hint_ = hint;
    zlfs_set_lifetime(fs_, file_, static_cast<uint32_t>(hint));
  }

 private:
  IOStatus HandOver() {
    if (gathered_.empty()) return IOStatus::OK();
    int err = zlfs_append(fs_, file_, reinterpret_cast<const uint8_t*>(gathered_.data()), gathered_.size());
    gathered_.clear();
    return Failed(err, "append to " + name_);
  }

  uint64_t fs_, file_;
  std::string name_;
  uint64_t size_;
  std::string gathered_;
  bool open_ = true;
};

// Creations, renames and deletes are durable when they return, so a directory has nothing left to sync.
class Directory : public rocksdb::FSDirectory {
 public:
  IOStatus Fsync(const IOOptions&, IODebugContext*) override { return IOStatus::OK(); }
};

class Lock : public rocksdb::FileLock {
 public:
  explicit Lock(std::string name) : name(std::move(name)) {}
  std::string name;
};

class ZonelabFileSystem : public rocksdb::FileSystem {
 public:
  ZonelabFileSystem(uint64_t fs, std::string uri) : fs_(fs), uri_(std::move(uri)) {}

  static const char* kClassName() { return "ZonelabFileSystem"; }
  const char* Name() const override { return kClassName(); }
  bool IsInstanceOf(const std::string& id) const override {
    return id == uri_ || rocksdb::FileSystem::IsInstanceOf(id);
  }

  IOStatus NewSequentialFile(const std::string& fname, const FileOptions&,
                             std::unique_ptr<rocksdb::FSSequentialFile>* result, IODebugContext*) override {
    uint64_t file = 0;
    int err = zlfs_open_read(fs_, fname.c_str(), &file);
    if (err != 0) return Failed(err, "open " + fname);
    result->reset(new SequentialFile(fs_, file, fname));
    return IOStatus::OK();
  }

  IOStatus NewRandomAccessFile(const std::string& fname, const FileOptions&,
                               std::unique_ptr<rocksdb::FSRandomAccessFile>* result, IODebugContext*) override {
    uint64_t file = 0;
    int err = zlfs_open_read(fs_, fname.c_str(), &file);
    if (err != 0) return Failed(err, "open " + fname);
    result->reset(new RandomAccessFile(fs_, file, fname));
    return IOStatus::OK();
  }

  IOStatus NewWritableFile(const std::string& fname, const FileOptions&,
                           std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext*) override {
    return OpenWritable(fname, false, result);
  }

  IOStatus ReopenWritableFile(const std::string& fname, const FileOptions&,
                              std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext*) override {
    return OpenWritable(fname, true, result);
  }

  IOStatus ReuseWritableFile(const std::string& fname, const std::string& old_fname, const FileOptions&,
                             std::unique_ptr<rocksdb::FSWritableFile>* result, IODebugContext*) override {
    int err = zlfs_rename(fs_, old_fname.c_str(), fname.c_str());
    if (err != 0) return Failed(err, "rename " + old_fname);
    return OpenWritable(fname, false, result);
  }

  IOStatus NewDirectory(const std::string& name, const IOOptions&, std::unique_ptr<rocksdb::FSDirectory>* result,
                        IODebugContext*) override {
    uint32_t kind = 0;
    int err = zlfs_stat(fs_, name.c_str(), &kind, nullptr, nullptr);
    if (err != 0) return Failed(err, "stat " + name);
    if (kind != 2) return IOStatus::PathNotFound("zonelab: no directory " + name);
    result->reset(new Directory());
    return IOStatus::OK();
  }

  IOStatus FileExists(const std::string& fname, const IOOptions&, IODebugContext*) override {
    uint32_t kind = 0;
    int err = zlfs_stat(fs_, fname.c_str(), &kind, nullptr, nullptr);
    if (err != 0) return Failed(err, "stat " + fname);
    return kind == 0 ? IOStatus::NotFound("zonelab: no " + fname) : IOStatus::OK();
  }

  IOStatus GetChildren(const std::string& dir, const IOOptions&, std::vector<std::string>* result,
                       IODebugContext*) override {
    std::vector<char> names(4096);
    size_t needed = 0;
    int err = zlfs_list(fs_, dir.c_str(), names.data(), names.size(), &needed);
    if (err == ERANGE) {
      names.resize(needed);
      err = zlfs_list(fs_, dir.c_str(), names.data(), names.size(), &needed);
    }
    if (err != 0) return Failed(err, "list " + dir);
    result->clear();
    for (size_t at = 0; at < needed;) {
      std::string name(names.data() + at);
      at += name.size() + 1;
      result->push_back(std::move(name));
    }
    return IOStatus::OK();
  }

  IOStatus DeleteFile(const std::string& fname, const IOOptions&, IODebugContext*) override {
    return Failed(zlfs_delete(fs_, fname.c_str()), "delete " + fname);
  }

  IOStatus CreateDir(const std::string& dirname, const IOOptions&, IODebugContext*) override {
    return Failed(zlfs_mkdir(fs_, dirname.c_str()), "mkdir " + dirname);
  }

  // Creates the missing directories on the way too (mkdir -p): zonedfs wants a parent for every new name, and a
  // fresh file system has none of the directories a --db path names (POSIX's would be in /tmp already).
  IOStatus CreateDirIfMissing(const std::string& dirname, const IOOptions&, IODebugContext*) override {
    for (size_t end = dirname.find('/', 1);; end = dirname.find('/', end + 1)) {
      const std::string dir = dirname.substr(0, end);
      uint32_t kind = 0;
      int err = zlfs_stat(fs_, dir.c_str(), &kind, nullptr, nullptr);
      if (err != 0) return Failed(err, "stat " + dir);
      if (kind == 1) return IOStatus::IOError("zonelab: " + dir + " is a file");
      if (kind == 0) {
        err = zlfs_mkdir(fs_, dir.c_str());
        if (err != 0) return Failed(err, "mkdir " + dir);
      }
      if (end == std::string::npos) return IOStatus::OK();
    }
  }

  IOStatus DeleteDir(const std::string& dirname, const IOOptions&, IODebugContext*) override {
    return Failed(zlfs_rmdir(fs_, dirname.c_str()), "rmdir " + dirname);
  }

  IOStatus GetFileSize(const std::string& fname, const IOOptions&, uint64_t* size, IODebugContext*) override {
    uint32_t kind = 0;
    int err = zlfs_stat(fs_, fname.c_str(), &kind, size, nullptr);
    if (err != 0) return Failed(err, "stat " + fname);
    return kind == 1 ? IOStatus::OK() : IOStatus::PathNotFound("zonelab: no file " + fname);
  }

  IOStatus GetFileModificationTime(const std::string& fname, const IOOptions&, uint64_t* mtime,
                                   IODebugContext*) override {
    uint32_t kind = 0;
    int err = zlfs_stat(fs_, fname.c_str(), &kind, nullptr, mtime);
    if (err != 0) return Failed(err, "stat " + fname);
    return kind == 1 ? IOStatus::OK() : IOStatus::PathNotFound("zonelab: no file " + fname);
  }

  IOStatus IsDirectory(const std::string& path, const IOOptions&, bool* is_dir, IODebugContext*) override {
    uint32_t kind = 0;
    int err = zlfs_stat(fs_, path.c_str(), &kind, nullptr, nullptr);
    if (err != 0) return Failed(err, "stat " + path);
    if (kind == 0) return IOStatus::PathNotFound("zonelab: no " + path);
    *is_dir = kind == 2;
    return IOStatus::OK();
  }

  IOStatus RenameFile(const std::string& src, const std::string& target, const IOOptions&,
                      IODebugContext*) override {
    return Failed(zlfs_rename(fs_, src.c_str(), target.c_str()), "rename " + src);
  }

  // A lock lives in this process: one mount per process reaches a device (an image is locked by its owner).
  IOStatus LockFile(const std::string& fname, const IOOptions&, rocksdb::FileLock** lock,
                    IODebugContext*) override {
    std::lock_guard<std::mutex> hold(locks_mutex_);
    if (!locks_.insert(fname).second) return IOStatus::IOError("zonelab: lock " + fname + " is held");
    *lock = new Lock(fname);
    return IOStatus::OK();
  }

  IOStatus UnlockFile(rocksdb::FileLock* lock, const IOOptions&, IODebugContext*) override {
    std::lock_guard<std::mutex> hold(locks_mutex_);
    locks_.erase(static_cast<Lock*>(lock)->name);
    delete lock;
    return IOStatus::OK();
  }

  IOStatus GetTestDirectory(const IOOptions&, std::string* path, IODebugContext*) override {
    *path = "/rocksdbtest";
    return IOStatus::OK();
  }

  IOStatus GetAbsolutePath(const std::string& db_path, const IOOptions&, std::string* output_path,
                           IODebugContext*) override {
    *output_path = db_path.empty() || db_path[0] != '/' ? "/" + db_path : db_path;
    return IOStatus::OK();
  }

  IOStatus GetFreeSpace(const std::string&, const IOOptions&, uint64_t* free_bytes, IODebugContext*) override {
    return Failed(zlfs_free_space(fs_, free_bytes), "free space");
  }

 private:
  IOStatus OpenWritable(const std::string& fname, bool append, std::unique_ptr<rocksdb::FSWritableFile>* result) {
    uint64_t file = 0;
    int err = zlfs_open_write(fs_, fname.c_str(), 0, append ? 1 : 0, &file);
    if (err != 0) return Failed(err, "create " + fname);
    uint64_t size = 0;
    uint32_t kind = 0;
    if (append && zlfs_stat(fs_, fname.c_str(), &kind, &size, nullptr) != 0) size = 0;
    result->reset(new WritableFile(fs_, file, fname, size));
    return IOStatus::OK();
  }

  uint64_t fs_;
  std::string uri_;
  std::mutex locks_mutex_;
  std::set<std::string> locks_;
};

rocksdb::FileSystem* MakeFileSystem(const std::string& uri, std::unique_ptr<rocksdb::FileSystem>* guard,
                                    std::string* errmsg) {
  uint64_t handle = 0;
  if (AllMounts().Get(uri, &handle, errmsg) != 0) return nullptr;
  guard->reset(new ZonelabFileSystem(handle, uri));
  return guard->get();
}

// Registered when the library is loaded.
const bool registered = [] {
  rocksdb::ObjectLibrary::Default()->AddFactory<rocksdb::FileSystem>(
      // "://" and anything, nothing included: a URI that names no device reaches MakeFileSystem for its message.
      rocksdb::ObjectLibrary::PatternEntry("zonelab", false).AddSeparator("://", false), MakeFileSystem);
  return true;
}();

}  // namespace
}  // namespace zonelab
