// Package conformance holds goverbs' completion-queue conformance suite:
// one test or more for each statement of ibv_create_cq(3),
// ibv_req_notify_cq(3), ibv_get_cq_event(3), ibv_ack_cq_events(3) and
// ibv_poll_cq(3), and for the completion-queue rows of
// shared/docs/pitfalls.md. The tests run on real kernels in the VM
// harness (make vmtest RUN=…), on soft-RoCE; outside it they skip.
//
// Where the rxe kernel departs from a man page, the test pins what the
// kernel does and says so; docs/CQ.md lists the departures.
package conformance
