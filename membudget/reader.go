package membudget

import (
	"context"
	"io"
)

// NewReadCloser returns rc whose reads first grow res to perByte times the
// bytes read so far and about to be read, up to most: what reading rc may
// hold (its bytes, what is decoded from them) is reserved before it is
// held. A read the budget cannot make room for fails with its
// *ExhaustedError, or ctx's error. Close closes rc and releases res. A nil
// res reserves nothing.
func NewReadCloser(ctx context.Context, rc io.ReadCloser, res *Reservation, perByte, most int64) io.ReadCloser {
	return &reservingReader{ctx: ctx, rc: rc, res: res, perByte: perByte, most: most}
}

type reservingReader struct {
	ctx           context.Context
	rc            io.ReadCloser
	res           *Reservation
	perByte, most int64
	read          int64
}

func (r *reservingReader) Read(p []byte) (int, error) {
	if r.res != nil {
		if want := min(r.most, r.perByte*(r.read+int64(len(p)))); want > r.res.Size() {
			if err := r.res.Resize(r.ctx, want); err != nil {
				return 0, err
			}
		}
	}
	n, err := r.rc.Read(p)
	r.read += int64(n)
	return n, err
}

func (r *reservingReader) Close() error {
	err := r.rc.Close()
	r.res.Release()
	return err
}
