// zonelab_ycsb: the YCSB core workloads (A to F) on RocksDB, for RocksDB on zonelab (--fs_uri=zonelab://...)
// or on any file system RocksDB knows. Our own implementation of YCSB's core workload and generators
// (Cooper et al., "Benchmarking Cloud Serving Systems with YCSB", SoCC 2010; the CoreWorkload property
// defaults): 1 KB records of 10 fields of 100 bytes, keys "user" + a hash of the record number.
//
//   zonelab_ycsb --db=PATH [--fs_uri=URI] --workload=a|b|c|d|e|f --phase=load|run|both
//                [--records=N] [--operations=N] [--threads=N] [--seed=N] [--sync=0|1]
//                [--value_bytes=N] [--write_buffer_bytes=N]
//
// --value_bytes sets a record's size (YCSB's fieldcount x fieldlength, default 1000); --write_buffer_bytes
// RocksDB's memtable size (default RocksDB's, 64 MiB); the ZWAL paper set it to the zone size.
//
// Workloads: A 50 % reads, 50 % updates, zipfian; B 95/5 reads/updates, zipfian; C reads, zipfian; D 95 %
// reads of the latest records, 5 % inserts; E 95 % scans of 1-100 records, 5 % inserts, zipfian; F 50 % reads,
// 50 % read-modify-writes, zipfian. The load phase inserts records 0..N-1 in order of their hashed keys'
// number. Each thread draws from its own generator seeded from --seed, so a run's operation mix is the same
// for the same seed. The result is JSON on stdout, shaped like fio's: one job per phase with, per operation,
// its count, IOPS, and latency in ns (mean, min, max, percentiles).
//
// Built by rocksdb/build.sh next to the plugin, and linked to it, so zonelab:// is registered.

#include <rocksdb/db.h>
#include <rocksdb/env.h>
#include <rocksdb/options.h>
#include <rocksdb/convenience.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <thread>
#include <vector>

namespace {

// SplitMix64: a small, seedable generator (Steele, Lea and Flood, OOPSLA 2014).
struct Random {
  uint64_t state;
  explicit Random(uint64_t seed) : state(seed) {}
  uint64_t Next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  double Unit() { return (Next() >> 11) * (1.0 / 9007199254740992.0); }
  uint64_t Below(uint64_t n) { return n == 0 ? 0 : Next() % n; }
};

// FNV-1a of a number's 8 bytes, as YCSB's Utils.fnvhash64 scrambles record numbers into keys.
uint64_t Fnv64(uint64_t value) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (int i = 0; i < 8; ++i) {
    hash ^= value & 0xff;
    hash *= 1099511628211ULL;
    value >>= 8;
  }
  return hash;
}

// Gray et al.'s zipfian generator ("Quickly generating billion-record synthetic databases", SIGMOD 1994), as
// YCSB's ZipfianGenerator uses it, with YCSB's constant 0.99; items 0..n-1, item 0 the most popular.
class Zipfian {
 public:
  explicit Zipfian(uint64_t n, double theta = 0.99) : n_(n), theta_(theta) {
    zeta2_ = Zeta(2);
    zetan_ = Zeta(n);
    alpha_ = 1.0 / (1.0 - theta_);
    eta_ = (1 - std::pow(2.0 / n_, 1 - theta_)) / (1 - zeta2_ / zetan_);
  }
  uint64_t Next(Random& random) const {
    double u = random.Unit();
    double uz = u * zetan_;
    if (uz < 1.0) return 0;
    if (uz < 1.0 + std::pow(0.5, theta_)) return 1;
    uint64_t item = static_cast<uint64_t>(n_ * std::pow(eta_ * u - eta_ + 1, alpha_));
    return std::min(item, n_ - 1);
  }

 private:
  double Zeta(uint64_t n) const {
    double sum = 0;
    for (uint64_t i = 1; i <= n; ++i) sum += 1.0 / std::pow(static_cast<double>(i), theta_);
    return sum;
  }
  uint64_t n_;
  double theta_, zeta2_, zetan_, alpha_, eta_;
};

std::string Key(uint64_t record) {
  char key[32];
  std::snprintf(key, sizeof key, "user%019llu", static_cast<unsigned long long>(Fnv64(record)));
  return key;
}

std::string Value(Random& random, uint64_t bytes) {
  std::string value(bytes, '\0');
  for (auto& byte : value) byte = static_cast<char>('a' + random.Below(26));
  return value;
}

enum Op { kRead, kUpdate, kInsert, kScan, kReadModifyWrite, kOps };
const char* kOpNames[kOps] = {"read", "update", "insert", "scan", "read_modify_write"};

struct Mix {
  double read, update, insert, scan, rmw;
  bool latest;  // D: reads prefer the latest records
};

bool MixOf(char workload, Mix* mix) {
  switch (workload) {
    case 'a': *mix = {0.5, 0.5, 0, 0, 0, false}; return true;
    case 'b': *mix = {0.95, 0.05, 0, 0, 0, false}; return true;
    case 'c': *mix = {1.0, 0, 0, 0, 0, false}; return true;
    case 'd': *mix = {0.95, 0, 0.05, 0, 0, true}; return true;
    case 'e': *mix = {0, 0, 0.05, 0.95, 0, false}; return true;
    case 'f': *mix = {0.5, 0, 0, 0, 0.5, false}; return true;
    default: return false;
  }
}

// Latencies of one operation type, in ns.
struct Latencies {
  std::vector<uint64_t> ns;
  uint64_t not_found = 0;
  void Merge(const Latencies& other) {
    ns.insert(ns.end(), other.ns.begin(), other.ns.end());
    not_found += other.not_found;
  }
};

// How many records may be read: every record below it has been inserted (YCSB's acknowledged counter).
// Inserts finish out of order on several threads; reading a record whose insert is still under way would
// count a miss the workload never meant.
class Acknowledged {
 public:
  explicit Acknowledged(uint64_t start) : limit_(start) {}
  uint64_t Limit() const { return limit_.load(); }
  void Done(uint64_t record) {
    std::lock_guard<std::mutex> hold(mutex_);
    finished_.insert(record);
    uint64_t limit = limit_.load();
    while (finished_.erase(limit) == 1) ++limit;
    limit_.store(limit);
  }

 private:
  std::atomic<uint64_t> limit_;
  std::mutex mutex_;
  std::set<uint64_t> finished_;
};

struct Options {
  std::string db, fs_uri, phase = "both";
  char workload = 'a';
  uint64_t records = 1000, operations = 1000, threads = 1, seed = 1, value_bytes = 1000, write_buffer_bytes = 0;
  bool sync = false;
};

bool Parse(int argc, char** argv, Options* options, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    size_t eq = arg.find('=');
    if (arg.rfind("--", 0) != 0 || eq == std::string::npos) {
      *error = "unexpected argument " + arg + ": options are --key=value";
      return false;
    }
    std::string key = arg.substr(2, eq - 2), value = arg.substr(eq + 1);
    char* end = nullptr;
    uint64_t number = std::strtoull(value.c_str(), &end, 10);
    bool is_number = !value.empty() && end != nullptr && *end == '\0';
    if (key == "db") {
      options->db = value;
    } else if (key == "fs_uri") {
      options->fs_uri = value;
    } else if (key == "phase" && (value == "load" || value == "run" || value == "both")) {
      options->phase = value;
    } else if (key == "workload" && value.size() == 1) {
      options->workload = value[0];
      Mix mix;
      if (!MixOf(options->workload, &mix)) {
        *error = "--workload=" + value + ": not a, b, c, d, e or f";
        return false;
      }
    } else if (is_number && key == "records" && number > 0) {
      options->records = number;
    } else if (is_number && key == "operations") {
      options->operations = number;
    } else if (is_number && key == "threads" && number > 0 && number <= 1024) {
      options->threads = number;
    } else if (is_number && key == "seed") {
      options->seed = number;
    } else if (is_number && key == "value_bytes" && number > 0 && number <= (64u << 20)) {
      options->value_bytes = number;
    } else if (is_number && key == "write_buffer_bytes" && number > 0) {
      options->write_buffer_bytes = number;
    } else if (is_number && key == "sync" && number <= 1) {
      options->sync = number == 1;
    } else {
      *error = "bad option " + arg;
      return false;
    }
  }
  if (options->db.empty()) {
    *error = "--db=PATH is required";
    return false;
  }
  return true;
}

// Runs `per_thread` operations on each of `threads` threads; returns latencies per operation type and the
// wall time taken.
struct PhaseResult {
  Latencies ops[kOps];
  double seconds = 0;
  uint64_t errors = 0;
  std::string first_error;
};

template <typename Body>
PhaseResult RunThreads(uint64_t threads, uint64_t total, uint64_t seed, Body body) {
  PhaseResult result;
  std::mutex merge;
  auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (uint64_t t = 0; t < threads; ++t) {
    workers.emplace_back([&, t] {
      Random random(seed * 1000003 + t);
      Latencies mine[kOps];
      uint64_t errors = 0;
      std::string first_error;
      uint64_t count = total / threads + (t < total % threads ? 1 : 0);
      for (uint64_t i = 0; i < count; ++i) {
        auto began = std::chrono::steady_clock::now();
        rocksdb::Status status;
        Op op = body(random, t, i, &status, &mine[0]);
        auto took = std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now() - began);
        if (!status.ok() && !status.IsNotFound()) {
          if (errors++ == 0) first_error = status.ToString();
          continue;
        }
        mine[op].ns.push_back(took.count());
      }
      std::lock_guard<std::mutex> hold(merge);
      for (int op = 0; op < kOps; ++op) result.ops[op].Merge(mine[op]);
      result.errors += errors;
      if (result.first_error.empty()) result.first_error = first_error;
    });
  }
  for (auto& worker : workers) worker.join();
  result.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return result;
}

void PrintJob(const char* name, const Options& options, PhaseResult& result, bool last) {
  std::printf("    {\"jobname\": \"%s\", \"workload\": \"%c\", \"threads\": %llu, \"runtime_s\": %.6f, \"errors\": %llu",
              name, options.workload, static_cast<unsigned long long>(options.threads), result.seconds,
              static_cast<unsigned long long>(result.errors));
  uint64_t total = 0;
  for (int op = 0; op < kOps; ++op) total += result.ops[op].ns.size();
  std::printf(", \"ops\": %llu, \"ops_per_s\": %.1f", static_cast<unsigned long long>(total),
              result.seconds > 0 ? total / result.seconds : 0.0);
  for (int op = 0; op < kOps; ++op) {
    auto& lat = result.ops[op];
    if (lat.ns.empty()) continue;
    std::sort(lat.ns.begin(), lat.ns.end());
    double mean = 0;
    for (auto ns : lat.ns) mean += ns;
    mean /= lat.ns.size();
    auto at = [&](double pct) { return lat.ns[std::min(lat.ns.size() - 1, static_cast<size_t>(pct / 100 * lat.ns.size()))]; };
    std::printf(",\n     \"%s\": {\"total_ios\": %zu, \"iops\": %.1f, \"not_found\": %llu, \"lat_ns\": {\"min\": %llu, "
                "\"max\": %llu, \"mean\": %.1f, \"percentile\": {\"50.000000\": %llu, \"95.000000\": %llu, "
                "\"99.000000\": %llu, \"99.900000\": %llu}}}",
                kOpNames[op], lat.ns.size(), result.seconds > 0 ? lat.ns.size() / result.seconds : 0.0,
                static_cast<unsigned long long>(lat.not_found), static_cast<unsigned long long>(lat.ns.front()),
                static_cast<unsigned long long>(lat.ns.back()), mean, static_cast<unsigned long long>(at(50)),
                static_cast<unsigned long long>(at(95)), static_cast<unsigned long long>(at(99)),
                static_cast<unsigned long long>(at(99.9)));
  }
  std::printf("}%s\n", last ? "" : ",");
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  std::string error;
  if (!Parse(argc, argv, &options, &error)) {
    std::fprintf(stderr, "zonelab_ycsb: %s\n", error.c_str());
    return 2;
  }
  rocksdb::Options db_options;
  db_options.create_if_missing = true;
  if (options.write_buffer_bytes > 0) {
    db_options.write_buffer_size = options.write_buffer_bytes;
    db_options.target_file_size_base = options.write_buffer_bytes;
  }
  std::shared_ptr<rocksdb::Env> env_guard;
  if (!options.fs_uri.empty()) {
    rocksdb::Env* env = nullptr;
    rocksdb::ConfigOptions config;
    rocksdb::Status status = rocksdb::Env::CreateFromUri(config, "", options.fs_uri, &env, &env_guard);
    if (!status.ok()) {
      std::fprintf(stderr, "zonelab_ycsb: %s: %s\n", options.fs_uri.c_str(), status.ToString().c_str());
      return 1;
    }
    db_options.env = env;
  }
  rocksdb::DB* raw = nullptr;
  rocksdb::Status status = rocksdb::DB::Open(db_options, options.db, &raw);
  if (!status.ok()) {
    std::fprintf(stderr, "zonelab_ycsb: open %s: %s\n", options.db.c_str(), status.ToString().c_str());
    return 1;
  }
  std::unique_ptr<rocksdb::DB> db(raw);
  rocksdb::WriteOptions write_options;
  write_options.sync = options.sync;
  rocksdb::ReadOptions read_options;

  Mix mix;
  MixOf(options.workload, &mix);
  Acknowledged inserted(options.phase == "run" ? options.records : 0);
  std::vector<std::pair<const char*, PhaseResult>> jobs;

  if (options.phase != "run") {
    std::atomic<uint64_t> next{0};
    PhaseResult load = RunThreads(options.threads, options.records, options.seed,
                                  [&](Random& random, uint64_t, uint64_t, rocksdb::Status* status, Latencies*) {
                                    uint64_t record = next++;
                                    *status = db->Put(write_options, Key(record), Value(random, options.value_bytes));
                                    inserted.Done(record);
                                    return kInsert;
                                  });
    jobs.emplace_back("load", std::move(load));
  }
  if (options.phase != "load") {
    Zipfian popular(options.records);
    std::atomic<uint64_t> next_insert{inserted.Limit()};
    PhaseResult run = RunThreads(
        options.threads, options.operations, options.seed + 1,
        [&](Random& random, uint64_t, uint64_t, rocksdb::Status* status, Latencies* lat) {
          double choice = random.Unit();
          uint64_t count = inserted.Limit();
          // Zipfian over the loaded records, scrambled so that popular keys spread over the key space; for D,
          // over the latest records.
          auto pick = [&] {
            uint64_t rank = popular.Next(random) % count;
            return mix.latest ? count - 1 - rank : Fnv64(rank) % count;
          };
          std::string value;
          if (choice < mix.read) {
            *status = db->Get(read_options, Key(pick()), &value);
            if (status->IsNotFound()) lat[kRead].not_found++;
            return kRead;
          }
          choice -= mix.read;
          if (choice < mix.update) {
            *status = db->Put(write_options, Key(pick()), Value(random, options.value_bytes));
            return kUpdate;
          }
          choice -= mix.update;
          if (choice < mix.insert) {
            uint64_t record = next_insert++;
            *status = db->Put(write_options, Key(record), Value(random, options.value_bytes));
            inserted.Done(record);
            return kInsert;
          }
          choice -= mix.insert;
          if (choice < mix.scan) {
            std::unique_ptr<rocksdb::Iterator> it(db->NewIterator(read_options));
            uint64_t length = 1 + random.Below(100);
            it->Seek(Key(pick()));
            for (uint64_t i = 0; i < length && it->Valid(); ++i) it->Next();
            *status = it->status();
            return kScan;
          }
          std::string key = Key(pick());
          *status = db->Get(read_options, key, &value);
          if (status->IsNotFound()) lat[kReadModifyWrite].not_found++;
          if (status->ok()) *status = db->Put(write_options, key, Value(random, options.value_bytes));
          return kReadModifyWrite;
        });
    jobs.emplace_back("run", std::move(run));
  }
  std::printf("{\n  \"ycsb version\": \"zonelab_ycsb 1\",\n  \"fs_uri\": \"%s\",\n  \"jobs\": [\n",
              options.fs_uri.c_str());
  uint64_t errors = 0;
  for (size_t i = 0; i < jobs.size(); ++i) {
    PrintJob(jobs[i].first, options, jobs[i].second, i + 1 == jobs.size());
    errors += jobs[i].second.errors;
    if (!jobs[i].second.first_error.empty()) {
      std::fprintf(stderr, "zonelab_ycsb: %s: %s\n", jobs[i].first, jobs[i].second.first_error.c_str());
    }
  }
  std::printf("  ]\n}\n");
  db.reset();
  return errors == 0 ? 0 : 1;
}
