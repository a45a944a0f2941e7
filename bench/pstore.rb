# Ruby's PStore on the seed workload of `make bench-store' (bench/store.lisp
# runs this and reads its output): create the store with "hoge" * N under
# one key, then time 1,000 transactions each appending "hoge" to it.
#
#   ruby bench/pstore.rb RUNS N...
#
# For each N, the minimum over RUNS runs (each in a fresh directory) of the
# 1,000 transactions, in PStore's default mode (the file rewritten in place,
# no fsync) and with ultra_safe (a temporary file renamed over it, no fsync).
# Prints one line per mode and N: "pstore MODE N MILLISECONDS".
require "pstore"
require "tmpdir"

runs = Integer(ARGV.shift)
ARGV.map { |n| Integer(n) }.each do |n|
  [["plain", false], ["ultra_safe", true]].each do |mode, ultra_safe|
    best = nil
    runs.times do
      Dir.mktmpdir("pstore-bench") do |dir|
        store = PStore.new(File.join(dir, "seed.pstore"))
        store.ultra_safe = ultra_safe
        store.transaction { store["hoge"] = "hoge" * n }
        start = Process.clock_gettime(Process::CLOCK_MONOTONIC)
        1000.times { store.transaction { store["hoge"] += "hoge" } }
        elapsed = Process.clock_gettime(Process::CLOCK_MONOTONIC) - start
        best = elapsed if best.nil? || elapsed < best
      end
    end
    puts format("pstore %s %d %.3f", mode, n, best * 1000)
    $stdout.flush
  end
end
