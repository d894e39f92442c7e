alter table history add column shell text;
