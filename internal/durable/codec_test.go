package durable

import (
	"crypto/rand"
	"fmt"
	"strings"
	"sync"
	"testing"

	commonpb "go.temporal.io/api/common/v1"
	"go.temporal.io/sdk/converter"
	"google.golang.org/protobuf/proto"
)

func jsonPayload(t testing.TB, v any) *commonpb.Payload {
	t.Helper()
	p, err := converter.GetDefaultDataConverter().ToPayload(v)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// The loop's codec and the SDK's zlib codec (what workers and clients of
// earlier versions wrote, and what recorded histories hold) read each
// other's payloads; small payloads travel as they are, large ones
// compressed, and one that does not compress stays as it is.
func TestCodecReadsAndIsReadByTheSDKsZlib(t *testing.T) {
	noise := make([]byte, 8<<10)
	rand.Read(noise)
	small := jsonPayload(t, "atom A attempt 1")
	large := jsonPayload(t, strings.Repeat("- [ ] A001: write A001.txt\n", 400))
	random := &commonpb.Payload{Metadata: map[string][]byte{converter.MetadataEncoding: []byte("binary/plain")}, Data: noise}
	sdk := converter.NewZlibCodec(converter.ZlibCodecOptions{})

	ours, err := codec{}.Encode([]*commonpb.Payload{small, large, random})
	if err != nil {
		t.Fatal(err)
	}
	for i, want := range []string{"json/plain", zlibEncoding, "binary/plain"} {
		if got := string(ours[i].Metadata[converter.MetadataEncoding]); got != want {
			t.Errorf("payload %d encoded as %s, want %s", i, got, want)
		}
	}
	if len(ours[1].Data) >= proto.Size(large)/4 {
		t.Errorf("the large payload compressed to %d bytes of %d", len(ours[1].Data), proto.Size(large))
	}
	theirs, err := sdk.Encode([]*commonpb.Payload{small, large, random})
	if err != nil {
		t.Fatal(err)
	}
	for name, c := range map[string]converter.PayloadCodec{"ours": codec{}, "the SDK's": sdk} {
		for from, enc := range map[string][]*commonpb.Payload{"ours": ours, "the SDK's": theirs} {
			back, err := c.Decode(enc)
			if err != nil {
				t.Fatalf("%s codec decoding %s payloads: %v", name, from, err)
			}
			for i, want := range []*commonpb.Payload{small, large, random} {
				if !proto.Equal(back[i], want) {
					t.Errorf("%s codec decoding %s payload %d: not what was encoded", name, from, i)
				}
			}
		}
	}
	if _, err := (codec{}).Decode([]*commonpb.Payload{{Metadata: map[string][]byte{converter.MetadataEncoding: []byte(zlibEncoding)}, Data: []byte("not zlib")}}); err == nil {
		t.Error("a broken zlib payload decoded without an error")
	}
}

// Workers encode and decode from many goroutines at once: the reused
// compressors never mix two payloads.
func TestCodecConcurrentUse(t *testing.T) {
	var wg sync.WaitGroup
	for g := range 8 {
		wg.Go(func() {
			for i := range 50 {
				want := jsonPayload(t, strings.Repeat(fmt.Sprintf("goroutine %d payload %d\n", g, i), 100))
				enc, err := codec{}.Encode([]*commonpb.Payload{want})
				if err != nil {
					t.Error(err)
					return
				}
				back, err := codec{}.Decode(enc)
				if err != nil || !proto.Equal(back[0], want) {
					t.Errorf("goroutine %d payload %d: %v", g, i, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
