//! Stable sorting compiled once: every sort of the core orders positions (`usize`) through one
//! comparator behind a reference, then moves the items into that order. The standard library's
//! sort is generic over the item and the comparator, so each call site with its own closure made
//! its own copy of the sorting code (3-35 KB of the component each, about 60 KB in all); the
//! sorts here are of small lists (a turn's tool calls, a request's headers, a run's records), for
//! which moving the items once more costs nothing measurable.

use std::cmp::Ordering;

/// `items` in a stable order by `compare`: equal items keep their order, as JavaScript's sort
/// keeps it.
pub(crate) fn sorted<T>(items: Vec<T>, compare: &dyn Fn(&T, &T) -> Ordering) -> Vec<T> {
    let positions = order(items.len(), &|a, b| compare(&items[a], &items[b]));
    let mut slots: Vec<Option<T>> = items.into_iter().map(Some).collect();
    positions
        .into_iter()
        .filter_map(|at| slots.get_mut(at).and_then(Option::take))
        .collect()
}

/// Sorts `items` in place, stably, by `compare` (through [`sorted`]).
pub(crate) fn sort_by<T>(items: &mut Vec<T>, compare: &dyn Fn(&T, &T) -> Ordering) {
    *items = sorted(std::mem::take(items), compare);
}

/// The positions `0..len` in a stable order by `compare`: the one instantiation of the sorting
/// code.
fn order(len: usize, compare: &dyn Fn(usize, usize) -> Ordering) -> Vec<usize> {
    let mut positions: Vec<usize> = (0..len).collect();
    positions.sort_by(|a, b| compare(*a, *b));
    positions
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably() {
        let items = vec![(2, 'a'), (1, 'b'), (2, 'c'), (0, 'd'), (1, 'e')];
        let by_key = sorted(items.clone(), &|a: &(i32, char), b: &(i32, char)| {
            a.0.cmp(&b.0)
        });
        assert_eq!(by_key, [(0, 'd'), (1, 'b'), (1, 'e'), (2, 'a'), (2, 'c')]);
        let mut in_place = items;
        sort_by(&mut in_place, &|a: &(i32, char), b: &(i32, char)| {
            b.0.cmp(&a.0)
        });
        assert_eq!(in_place, [(2, 'a'), (2, 'c'), (1, 'b'), (1, 'e'), (0, 'd')]);
    }

    #[test]
    fn agrees_with_the_standard_stable_sort() {
        // A fixed pseudo-random sequence with many ties.
        let mut state = 0x2545_f491_u32;
        let items: Vec<(u32, usize)> = (0..300)
            .map(|i| {
                state ^= state << 13;
                state ^= state >> 17;
                state ^= state << 5;
                (state % 17, i)
            })
            .collect();
        let mut expected = items.clone();
        expected.sort_by_key(|a| a.0);
        assert_eq!(
            sorted(items, &|a: &(u32, usize), b: &(u32, usize)| a.0.cmp(&b.0)),
            expected
        );
        assert!(sorted(Vec::<u8>::new(), &|a: &u8, b: &u8| a.cmp(b)).is_empty());
    }
}
