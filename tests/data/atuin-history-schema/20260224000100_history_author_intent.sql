alter table history add column author text;
alter table history add column intent text;
