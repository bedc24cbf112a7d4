// Package rendezvous is how a communicator's ranks find and trust each
// other: the unique id, the rendezvous server, each rank's connection to it
// (Bootstrap) and each rank's mailbox for file descriptors. It knows no
// collective and no datapath; comm uses it to build communicators.
//
// GetUniqueID starts a rendezvous server (goroutines) in the calling
// process and returns a 128-byte UniqueID naming its TCP address (loopback unless PURLIN_BOOTSTRAP_ADDR or PURLIN_SOCKET_IFNAME names another)
// and a random 256-bit secret. Connect (comm.InitRank) connects and proves it knows the
// secret by challenge-response (HMAC-SHA256 over both ends' nonces; the
// server proves it back), sends (rank, nranks, pid, host, device) and
// receives every rank's record once all arrived, bounded by the timeout. A
// connection without the proof is closed unanswered, may send no frame
// larger than a few KiB and gets a short handshake deadline; a duplicate
// rank or a disagreeing nranks from an authenticated rank is refused with a
// clear error. The connection stays open: it carries later
// exchanges (AllGather, AllGatherFD) and tells every rank when another rank aborts or its
// process ends without destroying its communicator. A rank gone is an error
// only for work that still needs it: the datapath fails, with errs.ErrRemote
// naming the rank, the waits that what the rank wrote before it went does
// not satisfy (so a slower rank's last collective, whose data all arrived,
// succeeds). Each rank also owns an abstract AF_UNIX socket, which passes
// file descriptors (SCM_RIGHTS) for the Atoms' shared memory and a shrunk
// communicator's unique id (SendUniqueID); it is named by a keyed hash of
// the secret and its rank (nothing about the secret shows in
// /proc/net/unix), and takes only messages with the secret's HMAC from a
// sender the kernel says is of the same user (or of PURLIN_PEER_UIDS).
// Ranks may be goroutines of one process or processes of one host.
package rendezvous
