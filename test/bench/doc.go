// Package bench holds goverbs' Go benchmarks on real rxe rings: poll
// (empty, and per completion at batch sizes 1, 16 and 64), ReqNotify, a
// completion event round trip, a latency tool's step (post one work
// request, poll its completion), and PostSend/PostRecv per work request.
// They run inside the VM harness (make bench); outside it they skip.
// Timings under QEMU TCG are comparable only within one run.
package bench
