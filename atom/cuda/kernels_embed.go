//go:build cudakernels

package cuda

import _ "embed"

// kernelImage is the fatbin `make kernels` builds from csrc/ (sm_80 and
// sm_90 SASS, sm_90 PTX), embedded when built with -tags cudakernels.
//
//go:embed kernels.fatbin
var kernelImage []byte
