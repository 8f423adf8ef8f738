//! The README's two commands, the main job and the tests, on its first screen: above "Who it is
//! for" and within its first 40 lines, where a reader who opened it sees them.

use crate::read;

/// The lines a first screen shows.
const FIRST_SCREEN: usize = 40;

/// The two commands, each as a line of its own.
const COMMANDS: [&str; 2] = ["cargo run -p oma-host -- demo", "cargo test"];

#[test]
fn the_two_commands_are_on_the_first_screen() {
    let readme = read("README.md");
    let lines: Vec<&str> = readme.lines().collect();
    let audience = lines
        .iter()
        .position(|line| line.trim() == "## Who it is for")
        .expect("the README has a heading `## Who it is for`");
    let screen = &lines[..audience.min(FIRST_SCREEN)];
    for command in COMMANDS {
        assert!(
            screen.iter().any(|line| line.trim() == command),
            "`{command}` is not a line of the README's first {} lines, above `## Who it is \
             for`",
            screen.len()
        );
    }
}
