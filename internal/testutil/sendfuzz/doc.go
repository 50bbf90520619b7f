// Package sendfuzz is the shared half of the providers' FuzzPostSend
// targets (provider/rxe, provider/mlx5): it turns fuzz input into batches
// of send work requests, the same way for both, and says whether two
// refusals of one request agree. Each target posts the batches to a QP as
// it is and to one made to check every request, and compares what they
// publish. Linux only, as the providers' send paths are.
package sendfuzz
