package durable

import (
	"bytes"
	"compress/zlib"
	"sync"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

// codec compresses the loop's payloads with zlib, in the layout of the
// SDK's zlib codec (a payload marshalled whole, compressed, its encoding
// "binary/zlib"), so payloads of either read back with either, and
// decodes with it. It differs in cost only: a payload under compressFrom bytes travels as it is (an
// attempt's input or result; compressing it gains a few bytes), and the
// compressors are reused (a new zlib writer allocates about 800 KB, which
// made a quarter of a worker's own CPU time in a loop of small attempts).
type codec struct{}

// compressFrom is the size from which a payload is compressed.
const compressFrom = 1 << 10

const zlibEncoding = "binary/zlib"

var (
	zlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}
	sdkZlib     = converter.NewZlibCodec(converter.ZlibCodecOptions{})
)

func (codec) Encode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	out := make([]*commonpb.Payload, len(payloads))
	for i, p := range payloads {
		out[i] = p
		if proto.Size(p) < compressFrom {
			continue
		}
		b, err := proto.Marshal(p)
		if err != nil {
			return payloads, err
		}
		var buf bytes.Buffer
		buf.Grow(len(b) / 4)
		w := zlibWriters.Get().(*zlib.Writer)
		w.Reset(&buf)
		_, err = w.Write(b)
		if cerr := w.Close(); err == nil {
			err = cerr
		}
		zlibWriters.Put(w)
		if err != nil {
			return payloads, err
		}
		if buf.Len() < len(b) {
			out[i] = &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(zlibEncoding)}, Data: buf.Bytes()}
		}
	}
	return out, nil
}

// Decode is the SDK's zlib codec's: the layout is the same.
func (codec) Decode(payloads []*commonpb.Payload) ([]*commonpb.Payload, error) {
	return sdkZlib.Decode(payloads)
}
