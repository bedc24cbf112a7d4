package comm

import "purlin/comm/rendezvous"

// UniqueID names one communicator's rendezvous (see package rendezvous):
// plain bytes that travel to every rank out of band.
type UniqueID = rendezvous.UniqueID

// UniqueIDBytes is the size of a UniqueID, equal to NCCL_UNIQUE_ID_BYTES.
const UniqueIDBytes = rendezvous.UniqueIDBytes

// GetUniqueID starts a rendezvous in this process and returns its id.
func GetUniqueID() (UniqueID, error) { return rendezvous.GetUniqueID() }

// SetForkHooks installs the functions told of every descriptor the
// rendezvous opens and closes, to be closed in a forked child (nil: none).
func SetForkHooks(track, untrack func(fd int)) { rendezvous.SetForkHooks(track, untrack) }
