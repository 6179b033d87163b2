package engine

import (
	"github.com/aot-loop/aot/internal/dag"
	"github.com/aot-loop/aot/internal/state"
)

// positions is a heap of ready atoms: the atom with the fewest attempts
// first (a failed atom waits while others have had fewer tries), then the
// one with the longest chain of work behind it (critical path first), then
// file order.
type positions struct {
	items  []entry
	height []int32 // by position: atoms on the longest dependent chain from it
}

// entry is a queued atom with its attempts when it was queued.
type entry struct {
	pos      int
	attempts int32
}

func (p *positions) Len() int { return len(p.items) }

func (p *positions) Less(i, j int) bool {
	a, b := p.items[i], p.items[j]
	if a.attempts != b.attempts {
		return a.attempts < b.attempts
	}
	if ha, hb := p.h(a.pos), p.h(b.pos); ha != hb {
		return ha > hb
	}
	return a.pos < b.pos
}

func (p *positions) h(pos int) int32 {
	if pos < len(p.height) {
		return p.height[pos]
	}
	return 0
}

func (p *positions) Swap(i, j int) { p.items[i], p.items[j] = p.items[j], p.items[i] }

func (p *positions) Push(x any) { p.items = append(p.items, x.(entry)) }

func (p *positions) Pop() any {
	x := p.items[len(p.items)-1]
	p.items = p.items[:len(p.items)-1]
	return x
}

// heights computes, for every atom, the number of atoms on the longest chain
// of atoms that depend on it (itself included), iteratively.
func heights(s *state.State, ix *dag.Index) []int32 {
	h := make([]int32, len(s.Atoms))
	state := make([]uint8, len(s.Atoms)) // 0 new, 1 on stack, 2 done
	type frame struct{ pos, next int }
	for root := range s.Atoms {
		if state[root] != 0 {
			continue
		}
		stack := []frame{{root, 0}}
		state[root] = 1
		for len(stack) > 0 {
			f := &stack[len(stack)-1]
			deps := ix.Dependents(s.Atoms[f.pos].ID)
			if f.next < len(deps) {
				c := ix.Position(deps[f.next])
				f.next++
				if c >= 0 && state[c] == 0 {
					state[c] = 1
					stack = append(stack, frame{c, 0})
				}
				continue
			}
			best := int32(0)
			for _, d := range deps {
				if c := ix.Position(d); c >= 0 && state[c] == 2 && h[c] > best {
					best = h[c]
				}
			}
			h[f.pos] = best + 1
			state[f.pos] = 2
			stack = stack[:len(stack)-1]
		}
	}
	return h
}
