-- docs/install.md: the database its example approves
CREATE DATABASE app;
