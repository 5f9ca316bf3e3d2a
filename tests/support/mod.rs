pub mod npm_fixture;
